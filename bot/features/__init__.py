"""Feature modules; each registers its commands, job kinds and listeners in setup(app)."""
