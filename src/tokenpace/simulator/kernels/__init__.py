"""Step times from silicon-measured kernel tables (NVIDIA's ``aiconfigurator-core``, an optional
extra: ``pip install 'tokenpace[kernels]'``).

``tables.py`` finds and reads the tables (GEMM, context and generation attention, all-reduce) for
one GPU, engine and version and interpolates them; ``moe.py`` reads a mixture of experts' layer
from the MoE tables; ``predictor.py`` prices an engine step from them
behind the ``StepPredictor`` interface, with lookups precomputed per model so a step costs
microseconds.
"""

from tokenpace.simulator.kernels.tables import (
    GPU_SYSTEMS, KernelTables, kernel_table_sets, load_tables, tables_available,
)

__all__ = ["GPU_SYSTEMS", "KernelTables", "kernel_table_sets", "load_tables", "tables_available"]
