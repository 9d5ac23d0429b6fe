//! Raw CUDA driver calls below the runtime: library probes, the memory pool, allocation
//! of plain-old-data buffers, 2-D memsets and staged copies.
