"""Chat adapters: each translates a platform to the neutral shape in bot.neutral."""
