"""An array that exists only as a DLPack capsule on a chosen device (e.g. kDLCUDA), made with
ctypes: it lets a machine without a GPU check how convjit routes device arrays. Its data pointer
is host memory that convjit must never touch (compile fails first on a build without CUDA)."""

import ctypes


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed)))]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

KDL_CUDA = 2
KDL_FLOAT = 2


class FakeDeviceArray:
    """A float32 4-D array that says it lives on (device_type, device_id)."""

    def __init__(self, shape, device_type=KDL_CUDA, device_id=0):
        self.shape = tuple(shape)
        self._device = (device_type, device_id)
        count = 1
        for d in self.shape:
            count *= d
        self._memory = (ctypes.c_float * max(count, 1))()
        self._shape = (ctypes.c_int64 * 4)(*self.shape)
        self._managed = []  # every capsule's struct stays alive as long as this object

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        managed = _Managed()
        managed.dl_tensor.data = ctypes.cast(self._memory, ctypes.c_void_p)
        managed.dl_tensor.device = _Device(*self._device)
        managed.dl_tensor.ndim = 4
        managed.dl_tensor.dtype = _DataType(KDL_FLOAT, 32, 1)
        managed.dl_tensor.shape = self._shape
        managed.dl_tensor.strides = None
        self._managed.append(managed)
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)
