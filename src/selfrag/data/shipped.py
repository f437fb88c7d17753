"""The benchmark samples shipped inside the package (``selfrag/data/samples/``).

Each sample is the first questions of a benchmark file, in that file's own
format, so the dataset's loader reads the sample and the full file alike.
Sources, licences and how each was cut: ``samples/README.md`` and the
``LICENSE`` beside each file.

A config names a sample in ``data.path`` as ``sample:NAME``; ``data.path:
null`` with a benchmark dataset means that dataset's default sample. The full
files come from ``selfrag data download NAME`` (:mod:`selfrag.eval.download`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import DataError

PREFIX = "sample:"


@dataclass(frozen=True)
class Sample:
    name: str
    dataset: str  # the data.dataset that reads it
    relpath: str  # under samples/
    questions: int
    description: str
    licence: str

    @property
    def path(self) -> Path:
        return samples_dir() / self.relpath


SAMPLES: dict[str, Sample] = {
    s.name: s
    for s in (
        Sample("hotpotqa", "hotpotqa", "hotpotqa/hotpotqa_dev_distractor_50.jsonl", 50,
               "HotpotQA dev (distractor): the first 50 non-yes/no questions, each with its 10 paragraphs",
               "CC BY-SA 4.0"),
        Sample("hotpotqa_yesno", "hotpotqa", "hotpotqa/hotpotqa_dev_yesno_17.jsonl", 17,
               "HotpotQA dev (distractor): the 17 yes/no questions among the first 200",
               "CC BY-SA 4.0"),
        Sample("hotpotqa_fit", "hotpotqa", "hotpotqa/hotpotqa_dev_pool_150.jsonl", 150,
               "HotpotQA dev (distractor): the first 150 questions of the fitting pool, in no evaluation "
               "sample (what `selfrag critic fit` reads by default)",
               "CC BY-SA 4.0"),
        Sample("pubmedqa", "pubmedqa", "pubmedqa/ori_pqal.json", 50,
               "PubMedQA PQA-L: the first 50 questions (23 of the official test split), each with its abstract",
               "MIT"),
        Sample("pubmedqa_fit", "pubmedqa", "pubmedqa/ori_pqal_train_80.json", 80,
               "PubMedQA PQA-L: the first 80 questions of the official training ids, each with its abstract "
               "(what `selfrag critic fit` reads by default beside hotpotqa_fit)",
               "MIT"),
        Sample("mmlu_evidence", "mmlu_evidence", "mmlu_evidence", 50,
               "MMLU medical, 6 subjects: the first 8-9 questions of each, without the Self-BioRAG evidence "
               "(no stated licence; `selfrag data download mmlu_evidence` fetches it)",
               "MIT (questions)"),
    )
}
# data.path: null with one of these datasets reads this sample.
DEFAULT_SAMPLE = {"hotpotqa": "hotpotqa", "pubmedqa": "pubmedqa", "mmlu_evidence": "mmlu_evidence"}


def samples_dir() -> Path:
    return Path(str(resources.files(__package__).joinpath("samples")))


def is_sample(value: str | None) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def get_sample(name: str) -> Sample:
    try:
        return SAMPLES[name]
    except KeyError:
        raise DataError(f"no shipped sample {name!r}; samples: {', '.join(SAMPLES)} "
                        "(`selfrag data list` shows them)") from None


def resolve(dataset: str, path: str | None) -> tuple[Path | None, Sample | None]:
    """The file (or folder) ``data.path`` names, and the sample it is, if it is one.

    ``sample:NAME`` is that sample (its dataset must be ``dataset``); None is the
    dataset's default sample, or nothing for a dataset without one (jsonl, demo).
    """
    if path is None:
        name = DEFAULT_SAMPLE.get(dataset)
        if name is None:
            return None, None
        sample = SAMPLES[name]
        return sample.path, sample
    if is_sample(path):
        sample = get_sample(path[len(PREFIX):])
        if sample.dataset != dataset:
            raise DataError(f"data.path {path} is a {sample.dataset} sample; set data.dataset={sample.dataset} "
                            f"(it is {dataset})")
        return sample.path, sample
    return Path(path).expanduser(), None
