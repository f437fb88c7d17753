"""Self-RAG with a prompted model (seeds 000 and 003): the method, its options and its critique modes."""

from .config import SelfRAGConfig
from .method import SelfRAG

__all__ = ["SelfRAG", "SelfRAGConfig"]
