"""What every method shares: the Method base, the registry, the trace, contexts and answer shaping."""
