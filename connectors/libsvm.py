"""LIBSVM text, as a record format of the sources: the parser is the library's
(:mod:`streamlearn.libsvm`, which reads a file into a CSR matrix without any source)."""

from streamlearn.libsvm import (MESSAGES, OPENERS, REASONS, LineError, ParsedChunk, compressed, open_binary,  # noqa: F401
                                parse_libsvm_bytes, read_libsvm)
