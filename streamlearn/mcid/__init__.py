"""The multi-class Pegasos family (MCID) of Chen, Chen & Yang,
*Characterizing Inverse Time Dependency in Multi-class Learning*
(``../shared/papers/000_9ee2d88cd77f9d98.txt``).

All five learners run the MCID solver (Alg. 1): for each mini-batch ``A_t`` of ``r``
consecutive stream examples,

    W^(t) = (1 - 1/t) W^(t-1) - 1/(lam t r) * sum_{(x, y) in A_t} dl/dW (W^(t-1))   (Eq. 14)

with the step ``eta_t = 1/(lam t)`` of the objective
``lam/2 ||W||_F^2 + E[l(W; x, y)]`` (Eq. 3). They differ only in the loss ``l``:

=============================  =========================================  ===========
learner                        loss                                       paper
=============================  =========================================  ===========
MulticlassLogisticRegression   softmax cross-entropy                      Alg. 2, Eq. 15
MulticlassSVM                  Crammer–Singer hinge                       Alg. 3, Eq. 16
MulticlassPerceptron           max_k w_k.x - w_y.x                        Alg. 4, Eq. 17
OneVsRestPegasos               K binary hinge losses ("K-Pegasos")        Sec. V-C
OneVsRestLogisticRegression    K binary logistic losses ("K-binaryLR")    Sec. V-C
=============================  =========================================  ===========

In a stream the mini-batch is not sampled at random (Alg. 1 line 3): it is the next
``batch_size`` examples, in order. The learners are therefore deterministic: ties in an
argmax go to the lowest class index, and ``seed`` has no effect on them (it is kept so
that every streamlearn learner takes one and checkpoints record it).

Options, both off by default:

* ``project=True`` — after each step, project ``W`` onto the ball of radius
  ``1/sqrt(lam)``, which contains the optimum (Pegasos' optional projection). It bounds
  the early iterates, which helps with a small ``lam`` and a large first gradient; for
  the one-vs-rest learners each class is projected onto its own ball, as K separate
  Pegasos runs would do.
* ``average=True`` — predict with the averaged iterate ``(1/t) sum_s W^(s)`` instead of
  the last one. It smooths the zig-zag of the 1/(lam t) steps and usually gives better
  held-out accuracy early in the stream; it costs a second weight matrix (memory x2)
  and one more sparse update per touched weight. Learning is unchanged: the iterates
  ``W^(t)`` are the same with or without it.
* ``average_power=q`` (with ``average=True``) — weight step ``s`` by ``s**q`` in that
  average: ``sum_s s^q W^(s) / sum_s s^q``. ``q = 0`` is the plain average; ``q > 0`` is
  the polynomial-decay averaging of Shamir & Zhang (ICML 2013), which forgets the first,
  largest steps faster — in a single pass the plain average still carries them. The
  defaults (``average=True``, ``q = 2``, no projection, and each learner's λ:
  :attr:`~streamlearn.mcid.solver.MCIDLearner.default_lam`) are the configuration with the smallest validation regret
  across five data sets, one pass (``bench/results/defaults.md``).
* ``adapt=True`` (the default) — watch the prequential mistakes with a Page-Hinkley test and,
  when the error rises, restart the step schedule and the average from the current weights, so
  that a model follows a changing stream however long it has run; and run a fast tracker (no
  average, a larger λ) beside the averaged model, which predicts while its recent mistakes are
  fewer, for streams that drift continuously (:mod:`streamlearn.adaptation`). On a stream that does
  not change nothing fires, the averaged model predicts, and its steps are the paper's.
* ``calibrate=True`` (the default) — probabilities are ``softmax(scores / temperature)``, with the
  one temperature that minimises the log-loss of the last 1,024 examples' prequential scores
  (:mod:`streamlearn.calibration`); it leaves every prediction unchanged. ``False``: the raw
  softmax of the scores (the sigmoids normalised, for ``OneVsRestLogisticRegression``).
* ``lam="auto"`` — learn one model per λ in :data:`AUTO_LAMBDAS` on the same stream and
  predict with the one whose progressive (test-then-train) accuracy is highest, each example
  weighted by the square of its step so that the early steps, where a large λ always looks
  best, fade. Every example is learned by every candidate: the compute and the memory are
  ``len(AUTO_LAMBDAS)`` times those of one λ. ``selected_lam`` says which λ predicts now.
  It needs no validation split, and on data where the default λ is far from the best it
  recovers most of the gap (``bench/results/defaults.md``, column *lam="auto"*).
"""

from .learners import (MulticlassLogisticRegression, MulticlassPerceptron, MulticlassSVM, OneVsRestLogisticRegression,
                       OneVsRestPegasos)
from .candidates import AUTO_LAMBDAS, lambda_candidates
from .solver import DEFAULT_AVERAGE_POWER, MCIDLearner

__all__ = ["AUTO_LAMBDAS", "DEFAULT_AVERAGE_POWER", "MCIDLearner", "MulticlassLogisticRegression", "MulticlassPerceptron",
           "MulticlassSVM", "OneVsRestLogisticRegression", "OneVsRestPegasos", "lambda_candidates"]
