"""Simulation pipeline: ontology -> graph -> environment -> run (camel-oasis) -> report."""
