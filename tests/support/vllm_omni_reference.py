"""vLLM-Omni 0.30's own decision on a speech request, read from the installed wheel.

The test extras install `vllm-omni==0.30.0` without its dependencies (Makefile). Its request
model (`protocol/audio.py`) needs only pydantic and numpy, so it is loaded by file path (the
package's `__init__` pulls in vLLM). The Gepard adapter module imports vLLM, so its
`GepardAdapter.validate` is compiled from the wheel's source on its own (with its two module
constants) and called as written; the serving layer's few checks around it
(serving_speech.py `create_speech`: sample_rate, model name, word_timestamps, the streaming
format / speed check) are replicated below.
"""

from __future__ import annotations

import __future__
import ast
import importlib.util
import sys
import warnings
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace


def wheel_root() -> Path:
    spec = importlib.util.find_spec("vllm_omni")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("vllm-omni is not installed: `pip install --no-deps vllm-omni==0.30.0` "
                           "(the test extras do it: make setup-test)")
    return Path(list(spec.submodule_search_locations)[0])


@lru_cache(maxsize=None)
def _module(rel: str, name: str):
    """A module of the wheel that needs no vLLM, loaded by file path."""
    spec = importlib.util.spec_from_file_location(name, wheel_root() / rel)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves a model's annotations through it
    with warnings.catch_warnings():  # its CreateAudio uses pydantic's deprecated class Config
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(module)
    return module


def request_model():
    return _module("entrypoints/openai/protocol/audio.py", "vllm_omni_protocol_audio").OpenAICreateSpeechRequest


def stream_config_model():
    """The speech WebSocket's session.config model (StreamingSpeechSessionConfig)."""
    return _module("entrypoints/openai/protocol/audio.py", "vllm_omni_protocol_audio").StreamingSpeechSessionConfig


def text_splitter():
    """The speech WebSocket's SpeechTextSplitter class."""
    return _module("entrypoints/openai/speech_text_splitter.py", "vllm_omni_speech_text_splitter").SpeechTextSplitter


def _tree(rel: str) -> ast.Module:
    path = wheel_root() / rel
    return ast.parse(path.read_text(), filename=str(path))


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _class_constants(cls: ast.ClassDef) -> dict:
    out = {}
    for n in cls.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            try:
                out[n.targets[0].id] = ast.literal_eval(n.value)
            except ValueError:
                pass
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            try:
                out[n.target.id] = ast.literal_eval(n.value)
            except ValueError:
                pass
    return out


@lru_cache(maxsize=1)
def gepard_adapter():
    """(validate function, adapter namespace) from tts_adapters/gepard.py and base.py."""
    tree = _tree("entrypoints/openai/tts_adapters/gepard.py")
    consts = [n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
              and getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", "") in
              ("_DEFAULT_VOICE", "_UNSUPPORTED_OPTIONAL_FIELDS")]
    adapter = _class(tree, "GepardAdapter")
    validate = next(n for n in adapter.body if isinstance(n, ast.FunctionDef) and n.name == "validate")
    code = compile(ast.Module(body=[*consts, validate], type_ignores=[]), "gepard.py", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace: dict = {}
    exec(code, namespace)
    base = _tree("entrypoints/openai/tts_adapters/base.py")
    bounds = {**_class_constants(_class(base, "TTSModelAdapter")), **_class_constants(_class(base, "ARTTSAdapter"))}
    own = _class_constants(adapter)
    self = SimpleNamespace(max_new_tokens_min=own.get("max_new_tokens_min", bounds["max_new_tokens_min"]),
                           max_new_tokens_max=own.get("max_new_tokens_max", bounds["max_new_tokens_max"]),
                           supported_output_sample_rates=own.get("supported_output_sample_rates", frozenset()),
                           native_speed_control=own.get("native_speed_control", False))
    return namespace["validate"], self, namespace


def unsupported_fields() -> tuple[str, ...]:
    return tuple(f for _, f in gepard_adapter()[2]["_UNSUPPORTED_OPTIONAL_FIELDS"])


def decide(body: dict, served_model: str, forced_aligner: bool = False) -> tuple[bool, str | None]:
    """(accepted, stream mode "none" / "raw" / "sse" or None when refused), as vLLM-Omni serving
    Gepard decides a JSON body (no uploaded voices). forced_aligner: as its serving layer decides
    with `--forced-aligner` (create_speech: word_timestamps refused on any stream, allowed on a
    whole response), its Gepard adapter's own refusal of the field set aside (it refuses it
    because Gepard's pipeline has no aligner stage: the one thing our server adds)."""
    from pydantic import ValidationError

    try:
        req = request_model().model_validate(body)
    except (ValidationError, TypeError, ValueError):
        return False, None
    validate, adapter, _ = gepard_adapter()
    if req.sample_rate is not None and req.sample_rate not in adapter.supported_output_sample_rates:
        return False, None
    if req.model and req.model != served_model:  # _check_model: 404 (vLLM's _is_model_supported: "" is any)
        return False, None
    if req.word_timestamps and (req.is_streaming() or not forced_aligner):
        return False, None
    if forced_aligner:
        req = req.model_copy(update={"word_timestamps": False})
    if req.is_streaming():
        if (req.response_format or "wav").lower() not in ("pcm", "wav"):
            return False, None
        if req.speed is not None and req.speed != 1.0 and not adapter.native_speed_control:
            return False, None
    if validate(adapter, req) is not None:
        return False, None
    return True, "raw" if req.is_raw_audio_stream() else "sse" if req.is_sse_stream() else "none"


@lru_cache(maxsize=1)
def aligner_words():
    """vLLM-Omni's word segmentation for word_timestamps (utils/qwen3_force_align_processor.py,
    `_tokenize_space_lang`: its path without qwen_asr), loaded by file path (it needs only the
    standard library)."""
    path = wheel_root() / "utils/qwen3_force_align_processor.py"
    spec = importlib.util.spec_from_file_location("vllm_omni_align_words", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._tokenize_space_lang


def serving_source() -> str:
    """serving_speech.py's text: the header names, the 4 KB limit and how the list is written."""
    return (wheel_root() / "entrypoints/openai/serving_speech.py").read_text()


def continuity_stats():
    """The bench's compute_continuity_stats (benchmarks/audio_continuity.py: no vLLM import)."""
    return _module("benchmarks/audio_continuity.py", "vllm_omni_audio_continuity").compute_continuity_stats


@lru_cache(maxsize=1)
def bench_names() -> dict[str, str]:
    """The bench's metric names (metrics/definitions.py's string constants, f-strings evaluated
    in order; the module itself imports vLLM-Omni's package, so it is read, not imported)."""
    names: dict[str, str] = {}
    for n in _tree("metrics/definitions.py").body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, (ast.Constant, ast.JoinedStr)):
            try:
                value = eval(compile(ast.Expression(n.value), "definitions.py", "eval"), {}, dict(names))
            except NameError:
                continue
            if isinstance(value, str):
                names[n.targets[0].id] = value
    return names


def voice_routes() -> dict[tuple[str, str], list[str]]:
    """api_server.py's voice routes: (method, path) -> the multipart fields its handler takes
    (the parameters given File(...) or Form(...)), read from the source."""
    routes = {}
    for fn in _tree("entrypoints/openai/api_server.py").body:
        if not isinstance(fn, ast.AsyncFunctionDef):
            continue
        for deco in fn.decorator_list:
            if (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.args
                    and isinstance(deco.args[0], ast.Constant) and "/v1/audio/voices" in str(deco.args[0].value)):
                args, defaults = fn.args.args, fn.args.defaults
                by_default = dict(zip([a.arg for a in args[len(args) - len(defaults):]], defaults))
                fields = [name for name, d in by_default.items()
                          if isinstance(d, ast.Call) and getattr(d.func, "id", None) in ("File", "Form")]
                routes[(deco.func.attr.upper(), deco.args[0].value)] = fields
    return routes


def _dict_keys(fn: ast.AST, target: str) -> set[str]:
    """The string keys of the dict literal assigned to `target` in a function, and of the keys it
    sets on it later (`target["k"] = ...`)."""
    keys = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == target for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript) \
                and getattr(node.targets[0].value, "id", None) == target and isinstance(node.targets[0].slice, ast.Constant):
            keys.add(node.targets[0].slice.value)
    return keys


def voice_listing_keys() -> set[str]:
    """The keys of an `uploaded_voices` entry (api_server.py list_voices' voice_entry)."""
    fn = next(f for f in _tree("entrypoints/openai/api_server.py").body
              if isinstance(f, ast.AsyncFunctionDef) and f.name == "list_voices")
    return _dict_keys(fn, "voice_entry")


def upload_result_keys() -> set[str]:
    """The keys of POST's `voice` object (serving_speech.py upload_voice's result)."""
    cls = _class(_tree("entrypoints/openai/serving_speech.py"), "OmniOpenAIServingSpeech")
    fn = next(f for f in cls.body if isinstance(f, ast.AsyncFunctionDef) and f.name == "upload_voice")
    return _dict_keys(fn, "result")


def api_server_source() -> str:
    return (wheel_root() / "entrypoints/openai/api_server.py").read_text()
