"""What the tests share: set-up helpers, fixtures imported by the modules that use them, sample
runs and data builders. The fake external services are in ``tests/fakes``; see tests/README.md."""
