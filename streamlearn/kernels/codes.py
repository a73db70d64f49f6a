"""Integer codes the kernels take for their losses and regularisers.

Kept apart from the kernels themselves, which import numba: the learners need the codes
at import time, and importing numba costs start-up time that the ahead-of-time kernels
(:mod:`streamlearn.kernels`) spare the ``streamlearn`` command.
"""

# MCID losses (000_9ee2d88cd77f9d98.txt); the PGS multi-class learners reuse SOFTMAX and CRAMMER_SINGER
SOFTMAX = 0  # multi-class logistic regression, Alg. 2 / Eq. 15
CRAMMER_SINGER = 1  # multi-class SVM hinge, Alg. 3 / Eq. 16
PERCEPTRON = 2  # multi-class perceptron, Alg. 4 / Eq. 17
OVR_HINGE = 3  # K binary Pegasos (one-vs-rest hinge)
OVR_LOGISTIC = 4  # K binary logistic regressions (one-vs-rest)

# PGS binary losses (003_5fe9be115ce0064e.txt, Sec. IV)
HINGE = 10  # binary hinge on y in {-1, +1}
LOGISTIC = 11  # binary logistic
SQUARED = 12  # least squares on y in {-1, +1}
REGRESSION = 13  # least squares on real targets (y is a float array)

# PGS regularisers
ENTRYWISE = 0  # ||W||_p^2 / (2(p-1)) over all entries
BLOCK = 1  # ||W||_{2,p}^2 / (2(p-1)): the l2 norm of each class, then the lp norm of those

# status of a LIBSVM line (kernels.text.parse_libsvm; BAD_LABEL_TEXT is found after it, in Python)
OK, SKIP, MALFORMED, NON_FINITE, MISSING_LABEL, EMPTY_FEATURES, LABEL_TOO_LONG = 0, 1, 2, 3, 4, 5, 6
DUPLICATE_FEATURE, BAD_LABEL_TEXT = 7, 8
#: the largest magnitude a feature value may have: the learners square values (standardisation,
#: feature bins, step sizes), and a larger one's square, summed over a row, leaves the float range
LARGEST_VALUE = 1e150
#: the longest label a record may carry (characters; bytes in LIBSVM text): a 1 MB "label" became a class,
#: which every checkpoint, `inspect` and `predict --proba` line then carried
MAX_LABEL_LENGTH = 256
