"""Asking a model for Self-RAG's critiques: the critic, candidate drafts, augmentation stages.

The pure half (readings, scores, parsing) is :mod:`selfrag.reflection`; this
package makes the calls.
"""

from .critic import Critic, CriticConfig, Task
from .drafts import drafts
from .source import SourceChoice, choose_source

__all__ = ["Critic", "CriticConfig", "SourceChoice", "Task", "choose_source", "drafts"]
