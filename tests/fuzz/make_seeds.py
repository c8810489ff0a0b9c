"""Writes the seed corpora of the fuzz targets added by issue 30 (npy,
records, image, torch_save, archive) into tests/fuzz/corpus/<target>/:
small valid files of each kind the readers accept, and a few they refuse.
Run with the torch virtual environment's python (numpy, PIL, torch):

    ~/.cache/runner/venv-torch-2.14.1/bin/python tests/fuzz/make_seeds.py

The torch.save, TorchScript and AOTI archives (*.pt, *.pt2) are not
committed: `scripts/dev fuzz` writes them with this script before fuzzing;
the other files are committed and replayed by ctest."""
import io
import pathlib
import struct
import sys
import zipfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    path = HERE / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def npy_bytes(array, version=None):
    out = io.BytesIO()
    if version is None:
        np.save(out, array)
    else:
        np.lib.format.write_array(out, array, version=version)
    return out.getvalue()


def npy():
    write("npy", "u8-4x3.npy", npy_bytes(np.arange(12, dtype=np.uint8).reshape(4, 3)))
    write("npy", "f4-5.npy", npy_bytes(np.linspace(0, 1, 5, dtype=np.float32)))
    write("npy", "i8-2x2x2.npy", npy_bytes(np.arange(8, dtype=np.int64).reshape(2, 2, 2)))
    write("npy", "f8-3x1.npy", npy_bytes(np.ones((3, 1))))
    write("npy", "b1-6.npy", npy_bytes(np.array([True, False] * 3)))
    write("npy", "i2-v2.npy", npy_bytes(np.arange(4, dtype=np.int16), version=(2, 0)))
    write("npy", "i4-v3.npy", npy_bytes(np.arange(4, dtype=np.int32), version=(3, 0)))
    write("npy", "i1-0x7.npy", npy_bytes(np.zeros((0, 7), dtype=np.int8)))
    write("npy", "fortran.npy", npy_bytes(np.asfortranarray(np.ones((2, 3), dtype=np.float32))))
    write("npy", "scalar.npy", npy_bytes(np.float32(1)))
    # Valid but huge: 2^40 elements declared, none present.
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776,), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    write("npy", "huge-2e40.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())


def idx(dims, payload):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def records():
    write("records", "idx1-labels", b"\x00" + idx([5], bytes([0, 1, 2, 9, 3])))
    write("records", "idx3-images", b"\x01" + idx([2, 4, 4], bytes(range(32))))
    write("records", "idx3-huge", b"\x01" + idx([1, 65535, 65535], b""))
    pixels = bytes((i * 7) % 256 for i in range(3072))
    write("records", "cifar10-record", b"\x02" + bytes([7]) + pixels)
    write("records", "cifar100-coarse", b"\x03" + bytes([19, 99]) + pixels)
    write("records", "cifar100-fine", b"\x04" + bytes([3, 42]) + pixels)
    write("records", "tokens-u16", b"\x05" + struct.pack("<H", 998) + struct.pack("<8H", *range(8)))
    write("records", "tokens-u32", b"\x06" + struct.pack("<H", 60000) + struct.pack("<6I", 1, 5, 59999, 0, 2, 3))


def image():
    from PIL import Image

    rgb = Image.frombytes("RGB", (12, 9), bytes((i * 37) % 256 for i in range(12 * 9 * 3)))
    gray = rgb.convert("L")

    def saved(img, fmt, **kw):
        out = io.BytesIO()
        img.save(out, fmt, **kw)
        return out.getvalue()

    # The first byte is the target's options (bit 0: one channel; bits 1-2: short_side).
    write("image", "rgb.jpg", b"\x00" + saved(rgb, "JPEG", quality=80))
    write("image", "rgb-progressive.jpg", b"\x02" + saved(rgb, "JPEG", progressive=True))
    write("image", "gray.jpg", b"\x01" + saved(gray, "JPEG"))
    write("image", "rgb.png", b"\x00" + saved(rgb, "PNG"))
    write("image", "gray.png", b"\x01" + saved(gray, "PNG"))
    write("image", "palette.png", b"\x00" + saved(rgb.convert("P"), "PNG"))
    write("image", "rgba-interlaced.png", b"\x04" + saved(rgb.convert("RGBA"), "PNG", interlace=1))
    write("image", "gray16.png", b"\x00" + saved(gray.convert("I;16"), "PNG"))


def torch_save():
    import torch

    def saved(obj):
        out = io.BytesIO()
        torch.save(obj, out)
        return out.getvalue()

    lin = torch.nn.Linear(3, 2)
    write("torch_save", "linear-state-dict.pt", saved(lin.state_dict()))
    base = torch.arange(6, dtype=torch.float32)
    write("torch_save", "views-and-dtypes.pt", saved({
        "a": base, "b": base[1:4], "c": base.view(2, 3).t(),
        "h": torch.ones(2, dtype=torch.float16), "i": torch.arange(3),
        "u": torch.zeros(2, dtype=torch.uint8), "flag": torch.tensor([True])}))
    write("torch_save", "checkpoint.pt", saved({"model": lin.state_dict(), "epoch": 3}))
    write("torch_save", "list.pt", saved([torch.zeros(1)]))
    # Each pickle on its own too (an input not starting with PK is a data.pkl).
    for name in ("linear-state-dict", "views-and-dtypes", "checkpoint"):
        with zipfile.ZipFile(HERE / "torch_save" / (name + ".pt")) as z:
            pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            write("torch_save", name + ".pkl", z.read(pkl))


def zip_of(entries):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries:
            z.writestr(name, data)
    return out.getvalue()


def archive():
    meta = ('{"runner.input_shape": "1,3,8,8", "runner.input_dtype": "float32", '
            '"runner.torch_version": "2.14.1", "runner.parameters": "1234", '
            '"runner.dynamic_dims": "0"}')
    write("archive", "torchscript.pt", zip_of([
        ("model/data.pkl", b"\x80\x02}q\x00."), ("model/extra/runner.json", meta),
        ("model/version", "3\n")]))
    write("archive", "torchscript-no-meta.pt", zip_of([("m/data.pkl", b"\x80\x02N."), ("m/version", "3\n")]))
    aoti = ('{"AOTI_DEVICE_KEY": "cpu", "runner.input_shape": "2,16", "runner.input_dtype": "int64", '
            '"runner.input_high": "100", "runner.device": "cpu"}')
    write("archive", "aoti.pt2", zip_of([
        ("pkg/data/aotinductor/model/model_metadata.json", aoti),
        ("pkg/data/aotinductor/model/model.so", b"\x7fELF"), ("pkg/version", "1\n")]))
    import torch

    scripted = torch.jit.script(torch.nn.Linear(2, 2))
    out = io.BytesIO()
    torch.jit.save(scripted, out, _extra_files={"runner.json": meta})
    write("archive", "jit-linear.pt", out.getvalue())
    write("archive", "bad-shape.pt", zip_of([("m/extra/runner.json", '{"runner.input_shape": "1,-3"}')]))


if __name__ == "__main__":
    for step in (sys.argv[1:] or ["npy", "records", "image", "torch_save", "archive"]):
        globals()[step]()
