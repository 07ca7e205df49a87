"""blocklab.traces: the trace schema, the Parquet trace store and the input formats."""
