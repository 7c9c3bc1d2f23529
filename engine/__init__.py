"""Core of the bot: storage, jobs, memory, LLM and simulation. Never imports `bot`."""
