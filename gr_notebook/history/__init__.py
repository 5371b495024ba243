"""What happened, kept and analysed: the run store and its checkpoint tables, the DataFrames
built from events, and the budgets learned from past runs."""
