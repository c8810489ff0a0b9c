"""runner-export: a PyTorch model into the files runner runs without Python.

One call writes, next to the prefix given by --out:

  OUT.pt2                 an AOTInductor package (torch.export, then
                          torch._inductor.aoti_compile_and_package), for the
                          `aoti` model plugin; runner's metadata is stored in
                          the package (aot_inductor.metadata)
  OUT.ts                  a TorchScript module (torch.jit.trace, or
                          torch.jit.script with --torchscript script), for the
                          `torchscript` model plugin; the same metadata in its
                          extra file runner.json
  OUT.safetensors         the weights (the module's state dict), so that a
                          native plugin with the same layout (resnet,
                          transformer_lm, ...) runs them eagerly: [model]
                          init_from = "OUT.safetensors"
  OUT.reference.safetensors  the example input ("input") and the eager
                          model's output on it in eval mode ("output"):
                          [model] check_against = "OUT.reference.safetensors"
                          makes any plugin prove it computes the same function
  OUT.json                the metadata, the time each step took (export,
                          AOTInductor compile, TorchScript) and each file's
                          SHA-256

The model comes from a torchvision name or from a Python file:

  runner-export --torchvision resnet18 --input-shape 1,3,224,224 --out models/resnet18-b1
  runner-export --python my_model.py:build --out models/mine

where `build()` returns (module, example_input) or (module, example_input,
info); info may give "input_high" (the exclusive upper bound of integer
inputs such as token ids: the vocabulary size). The module is exported in
eval mode, with the example input's shape; --dynamic-batch makes dimension 0
dynamic (the example's batch must then be at least 2: torch.export
specialises sizes 0 and 1).

Exit status: 0 done; 1 the model cannot be exported (the reason torch gave
is printed, and none of the files is left behind); 2 bad arguments.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import sys
import time

FORMAT_VERSION = "1"
PROGRAM = "runner-export"


class ExportFailure(Exception):
    """The model cannot be put in one of the formats; str() says why."""


def fail_usage(message):
    print(f"{PROGRAM}: {message}", file=sys.stderr)
    sys.exit(2)


def first_line(error):
    """The first non-empty line of an exception's message: torch's reasons
    come first, followed by pages of context."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_shape(text):
    try:
        shape = [int(part) for part in text.split(",")]
    except ValueError:
        fail_usage(f"--input-shape '{text}' is not a comma-separated list of sizes (e.g. 1,3,224,224)")
    if not shape or any(size < 1 for size in shape):
        fail_usage(f"--input-shape '{text}' must list sizes of at least 1")
    return shape


def load_python(spec):
    """(module, example_input, info) from FILE.py:FUNCTION."""
    path, sep, function = spec.rpartition(":")
    if not sep or not path or not function:
        fail_usage(f"--python '{spec}' must be FILE.py:FUNCTION")
    if not os.path.isfile(path):
        fail_usage(f"--python: '{path}' does not exist")
    loader = importlib.util.spec_from_file_location("runner_export_source", path)
    source = importlib.util.module_from_spec(loader)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    loader.loader.exec_module(source)
    if not hasattr(source, function):
        fail_usage(f"--python: '{path}' has no function '{function}'")
    made = getattr(source, function)()
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        fail_usage(f"--python: {function}() must return (module, example_input) or "
                   f"(module, example_input, info), returned {type(made).__name__}")
    model, example = made[0], made[1]
    info = made[2] if len(made) == 3 else {}
    return model, example, dict(info)


def load_torchvision(name, shape, num_classes):
    import torch
    import torchvision

    try:
        builder = torchvision.models.get_model_builder(name)
    except ValueError:
        fail_usage(f"--torchvision: torchvision has no model '{name}' "
                   f"(torchvision.models.list_models() lists them)")
    model = builder(weights=None, num_classes=num_classes)
    return model, torch.randn(shape), {}


def metadata_of(args, example, output, device, torch_version):
    """runner's metadata, as strings (the AOTInductor package stores strings)."""
    meta = {
        "runner.format_version": FORMAT_VERSION,
        "runner.torch_version": torch_version,
        "runner.device": device,
        "runner.input_shape": ",".join(str(s) for s in example.shape),
        "runner.input_dtype": str(example.dtype).replace("torch.", ""),
        "runner.dynamic_dims": "0" if args.dynamic_batch else "",
        "runner.output_shape": ",".join(str(s) for s in output.shape),
        "runner.output_dtype": str(output.dtype).replace("torch.", ""),
        "runner.source": args.torchvision and f"torchvision:{args.torchvision}" or f"python:{args.python}",
    }
    return meta


def export(args):
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.torchvision:
        model, example, info = load_torchvision(args.torchvision, parse_shape(args.input_shape),
                                                args.num_classes)
    else:
        model, example, info = load_python(args.python)
        if args.input_shape:
            fail_usage("--input-shape goes with --torchvision; a --python function gives its own example input")
    if not isinstance(model, torch.nn.Module):
        fail_usage(f"the model is a {type(model).__name__}, not a torch.nn.Module")
    if isinstance(example, (tuple, list)):
        if len(example) != 1:
            fail_usage(f"the example input must be one tensor; got {len(example)}")
        example = example[0]
    if not isinstance(example, torch.Tensor):
        fail_usage(f"the example input is a {type(example).__name__}, not a tensor")
    if args.dynamic_batch and example.shape[0] < 2:
        fail_usage("--dynamic-batch needs an example batch of at least 2 (torch.export specialises "
                   "a dimension of size 1); export with batch 2 or more")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail_usage("--device cuda: this machine has no CUDA device (torch.cuda.is_available() is False); "
                   "AOTInductor compiles CUDA packages on a GPU")
    model = model.to(args.device).eval()
    example = example.to(args.device).contiguous()

    timings = {}
    started = time.perf_counter()
    with torch.no_grad():
        output = model(example)
    timings["eager_first_call_s"] = time.perf_counter() - started
    if not isinstance(output, torch.Tensor):
        raise ExportFailure(f"the model returns a {type(output).__name__}; runner's plugins take "
                            f"models that return one tensor (logits)")
    meta = metadata_of(args, example, output, args.device, torch.__version__)
    meta["runner.parameters"] = str(sum(p.numel() for p in model.parameters()))
    if example.dtype in (torch.int32, torch.int64):
        high = info.get("input_high", int(example.max()) + 1)
        meta["runner.input_high"] = str(int(high))

    out = args.out
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    files = {}
    state = {name: t.detach().to("cpu").contiguous().clone() for name, t in model.state_dict().items()}
    save_file(state, out + ".safetensors", metadata={"source": meta["runner.source"]})
    files["weights"] = out + ".safetensors"
    save_file({"input": example.cpu(), "output": output.detach().cpu().contiguous()},
              out + ".reference.safetensors", metadata={"source": meta["runner.source"]})
    files["reference"] = out + ".reference.safetensors"

    formats = args.formats.split(",")
    if "torchscript" in formats:
        started = time.perf_counter()
        try:
            with torch.no_grad():
                if args.torchscript == "script":
                    scripted = torch.jit.script(model)
                else:
                    scripted = torch.jit.trace(model, (example,), check_trace=False)
        except Exception as e:  # torch raises many kinds; its message is the reason
            raise ExportFailure(f"TorchScript ({args.torchscript}) failed: {first_line(e)}") from e
        scripted.save(out + ".ts", _extra_files={"runner.json": json.dumps(meta, sort_keys=True)})
        timings["torchscript_s"] = time.perf_counter() - started
        files["torchscript"] = out + ".ts"
    if "aoti" in formats:
        dynamic = None
        if args.dynamic_batch:
            dynamic = ({0: torch.export.Dim("batch", min=1, max=args.max_batch)},)
        started = time.perf_counter()
        try:
            program = torch.export.export(model, (example,), dynamic_shapes=dynamic)
        except Exception as e:
            raise ExportFailure(
                f"torch.export could not export the model: {first_line(e)} "
                f"(graph breaks and data-dependent shapes stop torch.export; "
                f"{type(e).__module__}.{type(e).__name__})") from e
        timings["export_s"] = time.perf_counter() - started
        started = time.perf_counter()
        try:
            torch._inductor.aoti_compile_and_package(
                program, package_path=out + ".pt2",
                inductor_configs={"aot_inductor.metadata": dict(meta)})
        except Exception as e:
            raise ExportFailure(f"AOTInductor could not compile the model: {first_line(e)}") from e
        timings["aoti_compile_s"] = time.perf_counter() - started
        files["aoti"] = out + ".pt2"

    record = {
        "metadata": meta,
        "timings": timings,
        "parameters": sum(p.numel() for p in model.parameters()),
        "files": {role: {"path": os.path.basename(path), "sha256": sha256_of(path),
                         "bytes": os.path.getsize(path)} for role, path in files.items()},
    }
    if args.dynamic_batch:
        record["max_batch"] = args.max_batch
    with open(out + ".json.tmp", "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(out + ".json.tmp", out + ".json")
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Export a PyTorch model to AOTInductor and TorchScript for runner.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--torchvision", metavar="NAME", help="a torchvision model, e.g. resnet18")
    source.add_argument("--python", metavar="FILE.py:FUNCTION",
                        help="a function returning (module, example_input[, info])")
    parser.add_argument("--input-shape", help="--torchvision: the example input, e.g. 1,3,224,224")
    parser.add_argument("--num-classes", type=int, default=1000, help="--torchvision: outputs of the head")
    parser.add_argument("--out", required=True, help="path prefix of the files written")
    parser.add_argument("--formats", default="aoti,torchscript",
                        help="comma-separated: aoti, torchscript (default both)")
    parser.add_argument("--torchscript", choices=["trace", "script"], default="trace",
                        help="torch.jit.trace (default) or torch.jit.script (keeps train/eval behaviour)")
    parser.add_argument("--dynamic-batch", action="store_true", help="make the batch dimension dynamic")
    parser.add_argument("--max-batch", type=int, default=1024, help="--dynamic-batch: largest batch")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--seed", type=int, default=0, help="seeds the weights and the example input")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.torchvision and not args.input_shape:
        fail_usage("--torchvision needs --input-shape (e.g. 1,3,224,224)")
    unknown = [f for f in args.formats.split(",") if f not in ("aoti", "torchscript")]
    if unknown:
        fail_usage(f"--formats: unknown format '{unknown[0]}' (aoti, torchscript)")
    try:
        record = export(args)
    except ExportFailure as e:
        # Nothing half-written: a failed export leaves none of its files.
        for suffix in (".pt2", ".ts", ".safetensors", ".reference.safetensors", ".json"):
            if os.path.exists(args.out + suffix):
                os.remove(args.out + suffix)
        print(f"{PROGRAM}: cannot export the model: {e}", file=sys.stderr)
        return 1
    t = record["timings"]
    print(f"{PROGRAM}: wrote {', '.join(sorted(record['files']))} at {args.out}.* "
          + " ".join(f"{k}={v:.2f}" for k, v in sorted(t.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
