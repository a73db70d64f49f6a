"""A software prefetch for kernels that read rows of a large matrix in an order the hardware
cannot guess (an index's candidates): issued a step ahead, the row's cache lines are on their
way while the step before is computed, where a plain read waits a memory latency per row."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_LINE = 64


@intrinsic
def prefetch_row(typingctx, M, k):
    """Ask for the cache lines of row ``k`` of the C-contiguous 2-D array ``M`` (a hint: no
    value changes, nothing faults for an address never read; ``k`` must be a row of ``M``)."""
    signature = types.void(M, types.int64)

    def codegen(context, builder, sig, args):
        i64, i32 = ir.IntType(64), ir.IntType(32)
        array = context.make_array(sig.args[0])(context, builder, args[0])
        item_bytes = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        start = builder.add(builder.ptrtoint(array.data, i64), builder.mul(args[1], builder.extract_value(array.strides, 0)))
        n_bytes = builder.mul(builder.extract_value(array.shape, 1), ir.Constant(i64, item_bytes))
        n_lines = builder.udiv(builder.add(n_bytes, ir.Constant(i64, _LINE - 1)), ir.Constant(i64, _LINE))
        pointer = ir.IntType(8).as_pointer()
        prefetch = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [pointer, i32, i32, i32]),
                                                  "llvm.prefetch.p0")
        with cgutils.for_range(builder, n_lines) as loop:
            address = builder.add(start, builder.mul(loop.index, ir.Constant(i64, _LINE)))
            # a read (0), kept in every cache level (3), of data (1)
            builder.call(prefetch, [builder.inttoptr(address, pointer), ir.Constant(i32, 0), ir.Constant(i32, 3),
                                    ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return signature, codegen
