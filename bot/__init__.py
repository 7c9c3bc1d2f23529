"""The chat edge: adapters (console, Discord, Telegram), platform-neutral commands, CLI."""
