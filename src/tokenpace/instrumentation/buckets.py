"""Histogram bucket boundaries, seconds (tokens for TOKENS), shared by the Prometheus and the
OpenTelemetry exports. Where the OpenTelemetry GenAI semantic conventions give boundaries
(``gen_ai.client.*`` metrics), these are theirs, so both exports bucket alike."""

from __future__ import annotations

# gen_ai.client.operation.duration
OPERATION_DURATION_S = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
# gen_ai.client.operation.time_to_first_chunk
TIME_TO_FIRST_CHUNK_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
# gen_ai.client.operation.time_per_output_chunk
TIME_PER_OUTPUT_CHUNK_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
# gen_ai.client.token.usage
TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
# tokenpace's own: inter-token gaps are often a few milliseconds, below the conventions' first bucket
ITL_S = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)
# the proxy's own added latency: tens of microseconds to a few milliseconds
PROXY_ADDED_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1)
