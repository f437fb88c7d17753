"""Retrievers behind one protocol, and document loading."""

from .base import Retriever, RetrieverFactory
from .bm25 import BM25Retriever
from .registry import create_retriever, retriever_factory
from .store import load_corpus, read_documents, write_documents

__all__ = [
    "BM25Retriever",
    "Retriever",
    "RetrieverFactory",
    "create_retriever",
    "load_corpus",
    "read_documents",
    "retriever_factory",
    "write_documents",
]
