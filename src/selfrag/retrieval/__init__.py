"""Retrievers behind one protocol, persistent indexes, and document loading.

Importing this package loads no model: encoders load on first use.
"""

from .base import Retriever, RetrieverFactory, RetrieverKind
from .bm25 import BM25Retriever
from .dense import DenseRetriever
from .encoders import Encoder, get_encoder
from .hybrid import HybridRetriever
from .persist import load_index, save_index
from .registry import available_retrievers, create_retriever, get_kind, retriever_factory
from .store import load_corpus, read_documents, write_documents

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "Encoder",
    "HybridRetriever",
    "Retriever",
    "RetrieverFactory",
    "RetrieverKind",
    "available_retrievers",
    "create_retriever",
    "get_encoder",
    "get_kind",
    "load_corpus",
    "load_index",
    "read_documents",
    "retriever_factory",
    "save_index",
    "write_documents",
]
