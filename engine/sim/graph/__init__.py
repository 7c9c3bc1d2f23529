"""Step 2: the simulation's knowledge graph.

``step`` extracts entities and facts from the documents' chunks (``chunking``) against the
ontology and resolves names into one node per actor (``entity_merge``); ``store`` keeps the graph
in the bot's database and is its reading API, with the records in ``model``, the searches in
``search``, the embeddings' format in ``vectors`` and the pictures of it (a PNG and an interactive
HTML page, /graph) in ``view``.
"""
