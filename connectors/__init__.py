"""Sources and sinks that turn bytes into labelled records (see ../shared/DESIGN.md).

So far: :mod:`connectors.libsvm`, a reader of LIBSVM/svmlight files (plain, gz, bz2, xz).
"""
