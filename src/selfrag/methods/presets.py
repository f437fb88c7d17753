"""The seeds' pipelines, each shipped as a preset in the repository's ``configs/`` folder.

Each preset runs its seed's pipeline as the seed describes it, with no
setting to change; ``selfrag methods`` lists them under the methods.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    file: str  # in configs/
    method: str
    seed: str
    pipeline: str


PRESETS: tuple[Preset, ...] = (
    Preset("self_rag_seed000.yaml", "self_rag", "seed 000",
           "4 phases, prompted text labels: decide, retrieve, answer and judge each passage, rate, select; 1 + 2n calls"),
    Preset("self_rag_segment.yaml", "self_rag_segment", "seed 001",
           "the paper's segment loop: retrieve yes / no / continue per sentence, critiqued candidates, beam search"),
    Preset("selfbio_rag.yaml", "vanilla_rag", "seed 002",
           "Self-BioRAG's augmentations: adaptive retrieval, the critic reranker, self-reflection"),
    Preset("self_rag_seed003.yaml", "self_rag", "seed 003",
           "7 steps, one JSON verdict per call: decide, retrieve, judge every passage, answer, support, utility, select;"
           " 1 + 4k calls"),
    Preset("self_corrective.yaml", "self_corrective", "seed 004",
           "reflect on the retrieved documents, reformulate the query, retry (top_k 3)"),
)
