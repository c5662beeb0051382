"""Loading model pairs: where a model comes from, the built-in pair's cache, reading ahead, the CPU fast paths
(int8 draft, prepacked target) and tiny random pairs for tests. May import only the base modules.
"""
