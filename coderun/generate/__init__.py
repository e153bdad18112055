"""Generation: ask a model server for samples of every prompt, resumably.

    base.py           the provider interface (a tiny base class) and its request/response types
    openai_compat.py  any OpenAI-compatible server (OpenAI, vLLM, Ollama, TGI, llama.cpp), chat or completion
    extract.py        code extraction from chat answers; completion truncation and solution assembly
    records.py        the GeneratedSample record written to samples.jsonl
    runner.py         resume, concurrency, retries' outer loop, progress, writing samples and raw responses
"""

from coderun.generate.base import (
    Endpoint,
    Generation,
    GenerationRequest,
    Provider,
    RetryPolicy,
    get_provider,
    provider_names,
)
from coderun.generate.records import GeneratedSample, raw_path_for
from coderun.generate.runner import GenerationConfig, GenerationSummary, run_generation

__all__ = [
    "Endpoint", "Generation", "GenerationConfig", "GenerationRequest", "GenerationSummary", "Provider",
    "RetryPolicy", "GeneratedSample", "get_provider", "provider_names", "raw_path_for", "run_generation",
]
