"""Readers of untrusted bytes under a limits profile (DESIGN decision 6).

``archives`` (tar, tar.lz4, tar.zst and zip, read as streams), ``npy`` (NPY/NPZ headers checked
before any allocation, never a pickle), ``safetensors`` (header, dtypes and offsets checked before
any tensor is mapped), ``onnxcase`` (an ONNX backend case: model and data sets,
read from its manifest) and ``content`` (the content check a record's kind asks for).
"""

__all__ = ["archives", "content", "npy", "onnxcase", "safetensors"]
