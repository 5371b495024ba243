"""What happened, kept and analysed: the run store, the DataFrames built from events,
intervention replays, adaptive budgets learned from past runs, and the guidance lint."""
