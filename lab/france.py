"""The five-passage corpus and question the scripted-model benchmarks share (critical_path, serve_load)."""

QUESTION = "What is the capital of France?"
DOCS = [
    ("Paris", "Paris is the capital and largest city of France."),
    ("France", "France is a country in Western Europe; its capital is Paris."),
    ("Seine", "The Seine flows through Paris, the capital of France."),
    ("Louvre", "The Louvre in Paris, the French capital, is the most visited museum."),
    ("Lyon", "Lyon is the third-largest city of France, after Paris and Marseille."),
]
