"""Platform-neutral commands: each defined once, rendered by every adapter."""
