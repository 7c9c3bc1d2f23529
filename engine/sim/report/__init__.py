"""Step 5: the report. Statistics and charts from the run's data, tools for the report agent,
and the agent that plans and writes ``report.md``."""
