"""Reports and plots drawn from results (matplotlib imported lazily, Agg backend)."""
