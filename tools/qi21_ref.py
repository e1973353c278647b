#!/usr/bin/env python3
"""Puts the Qwen-Image-2.1 reference modules into a diffusers tree that predates them.

diffusers' commit 58eb52c0 (the reference tree the goldens are generated with) has no Qwen-Image-2.1 files. An
overlay folder holds the three upstream files, flat, next to a SOURCES.json naming the commit of each:

    <overlay>/pipeline_qwenimage21.py        -> diffusers.pipelines.qwenimage21.pipeline_qwenimage21
    <overlay>/transformer_qwenimage21.py     -> diffusers.models.transformers.transformer_qwenimage21
    <overlay>/autoencoder_kl_qwenimage21.py  -> diffusers.models.autoencoders.autoencoder_kl_qwenimage21
    <overlay>/SOURCES.json                   {"repo", "base", "files": {name: {"path", "commit", "chars"}}}

install() loads them under those module names (so their relative imports resolve inside the installed diffusers)
and sets QwenImage21Pipeline, QwenImage21Transformer2DModel, AutoencoderKLQwenImage21 and QwenImage21KVCache as
attributes of `diffusers`, `diffusers.models` and `diffusers.pipelines`. diffusers' lazy modules only consult their
import table for names missing from the module's own attributes, so afterwards `from diffusers import
QwenImage21Pipeline` works, `DiffusionPipeline.from_pretrained` resolves the names written in model_index.json
(it looks them up with getattr on `diffusers`), and `save_pretrained` records the library as "diffusers".

The overlay folder comes from the argument or the QI21_REF environment variable. Without either, install() does
nothing when the installed diffusers already has the 2.1 modules and fails with a message otherwise.

Use it before anything imports the 2.1 names:
    import qi21_ref; qi21_ref.install()          # QI21_REF=<overlay> in the environment
    python3 tools/qi21_ref.py <overlay>          # check: loads everything and prints the classes
"""
import importlib
import importlib.util
import json
import os
import sys
import types

MODULES = (  # (file, module name), in load order: the pipeline imports the two models from diffusers.models
    ("transformer_qwenimage21.py", "diffusers.models.transformers.transformer_qwenimage21"),
    ("autoencoder_kl_qwenimage21.py", "diffusers.models.autoencoders.autoencoder_kl_qwenimage21"),
    ("pipeline_qwenimage21.py", "diffusers.pipelines.qwenimage21.pipeline_qwenimage21"),
)
EXPORTS = {  # module name -> names set on diffusers, diffusers.models / diffusers.pipelines
    "diffusers.models.transformers.transformer_qwenimage21": ("QwenImage21Transformer2DModel", "QwenImage21KVCache"),
    "diffusers.models.autoencoders.autoencoder_kl_qwenimage21": ("AutoencoderKLQwenImage21",),
    "diffusers.pipelines.qwenimage21.pipeline_qwenimage21": ("QwenImage21Pipeline",),
}
_installed = None


def _native():
    try:
        return importlib.util.find_spec("diffusers.pipelines.qwenimage21.pipeline_qwenimage21") is not None
    except (ImportError, AttributeError, ValueError):
        return False


def sources(overlay=None):
    """The overlay's SOURCES.json as a dict ({} when there is none)."""
    overlay = overlay or os.environ.get("QI21_REF")
    if not overlay:
        return {}
    path = os.path.join(overlay, "SOURCES.json")
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    parent, _, leaf = name.rpartition(".")
    setattr(sys.modules[parent], leaf, module)
    return module


def install(overlay=None):
    """Loads the overlay into diffusers (once); returns the overlay folder used, or None for native modules."""
    global _installed
    overlay = overlay or os.environ.get("QI21_REF")
    if _installed is not None:
        return _installed or None
    if not overlay:
        if _native():
            _installed = ""
            return None
        raise RuntimeError("diffusers has no Qwen-Image-2.1 modules: set QI21_REF to the overlay folder "
                           "(the unpacked qi21src) or pass it to install()")
    overlay = os.path.abspath(overlay)
    for fname, _ in MODULES:
        if not os.path.isfile(os.path.join(overlay, fname)):
            raise FileNotFoundError(f"overlay {overlay} lacks {fname}")

    import diffusers
    import diffusers.models
    import diffusers.models.autoencoders  # noqa: F401  (real packages: their __init__ runs here)
    import diffusers.models.transformers  # noqa: F401
    import diffusers.pipelines

    # diffusers.pipelines.qwenimage21 does not exist in the tree: a bare package stands in for it
    pkg_name = "diffusers.pipelines.qwenimage21"
    if pkg_name not in sys.modules:
        pkg = types.ModuleType(pkg_name)
        pkg.__path__ = [overlay]
        pkg.__package__ = pkg_name
        sys.modules[pkg_name] = pkg
        setattr(diffusers.pipelines, "qwenimage21", pkg)

    for fname, name in MODULES:
        module = _load(os.path.join(overlay, fname), name)
        targets = [diffusers, diffusers.pipelines if ".pipelines." in name else diffusers.models]
        if name.endswith("pipeline_qwenimage21"):
            targets.append(sys.modules[pkg_name])
        for attr in EXPORTS[name]:
            obj = getattr(module, attr)
            for target in targets:
                setattr(target, attr, obj)
    _installed = overlay
    return overlay


def main():
    overlay = install(sys.argv[1] if len(sys.argv) > 1 else None)
    import diffusers
    from diffusers import (AutoencoderKLQwenImage21, QwenImage21KVCache, QwenImage21Pipeline,  # noqa: F401
                           QwenImage21Transformer2DModel)
    print("diffusers", diffusers.__version__, "overlay", overlay)
    for cls in (QwenImage21Pipeline, QwenImage21Transformer2DModel, AutoencoderKLQwenImage21, QwenImage21KVCache):
        print(" ", cls.__module__ + "." + cls.__name__)
    for name, meta in sources(overlay).get("files", {}).items():
        print(" ", name, meta.get("commit"))


if __name__ == "__main__":
    main()
