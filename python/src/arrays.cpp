#include "arrays.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace convjit::python {
namespace {

PyObject* g_error_type = nullptr;

std::string shape_text(const std::int64_t* shape, std::size_t rank) {
  std::string text = "(";
  for (std::size_t i = 0; i < rank; ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + (rank == 1 ? ",)" : ")");
}

// The framework of an object's type, cached per type: one dictionary lookup per array.
Framework framework_of(nb::handle object) {
  static std::unordered_map<PyTypeObject*, Framework> cache;
  PyTypeObject* type = Py_TYPE(object.ptr());
  if (auto it = cache.find(type); it != cache.end()) return it->second;
  std::string module;
  if (nb::object name =
          nb::getattr(nb::handle(reinterpret_cast<PyObject*>(type)), "__module__", nb::none());
      nb::isinstance<nb::str>(name)) {
    module = nb::cast<std::string>(name);
  }
  const std::string top = module.substr(0, module.find('.'));
  Framework framework = Framework::kOther;
  if (top == "numpy")
    framework = Framework::kNumpy;
  else if (top == "torch")
    framework = Framework::kTorch;
  else if (top == "jax" || top == "jaxlib")
    framework = Framework::kJax;
  else if (top == "tensorflow")
    framework = Framework::kTensorflow;
  else if (top == "cupy")
    framework = Framework::kCupy;
  cache.emplace(type, framework);
  return framework;
}

bool to_convjit_dtype(nb::dlpack::dtype dt, convjit_dtype* out) {
  if (dt.lanes != 1) return false;
  const auto code = static_cast<nb::dlpack::dtype_code>(dt.code);
  if (code == nb::dlpack::dtype_code::Float) {
    if (dt.bits == 16)
      *out = CONVJIT_HALF;
    else if (dt.bits == 32)
      *out = CONVJIT_FLOAT32;
    else if (dt.bits == 64)
      *out = CONVJIT_FLOAT64;
    else
      return false;
    return true;
  }
  if (code == nb::dlpack::dtype_code::Bfloat && dt.bits == 16) {
    *out = CONVJIT_BFLOAT16;
    return true;
  }
  return false;
}

std::string dlpack_dtype_name(nb::dlpack::dtype dt) {
  switch (static_cast<nb::dlpack::dtype_code>(dt.code)) {
    case nb::dlpack::dtype_code::Int:
      return "int" + std::to_string(dt.bits);
    case nb::dlpack::dtype_code::UInt:
      return "uint" + std::to_string(dt.bits);
    case nb::dlpack::dtype_code::Float:
      return "float" + std::to_string(dt.bits);
    case nb::dlpack::dtype_code::Bfloat:
      return "bfloat" + std::to_string(dt.bits);
    case nb::dlpack::dtype_code::Complex:
      return "complex" + std::to_string(dt.bits);
    case nb::dlpack::dtype_code::Bool:
      return "bool";
  }
  return "unknown";
}

[[noreturn]] void refuse_dtype(const std::string& got) {
  raise_error("Value for attr 'T' of " + got +
              " is not in the list of allowed values: half, bfloat16, float, double");
}

// NumPy arrays of ml_dtypes.bfloat16 export neither DLPack nor a buffer format nanobind knows:
// read them as their 16-bit words.
bool is_numpy_bfloat16(nb::handle object) {
  nb::object dtype = nb::getattr(object, "dtype", nb::none());
  if (dtype.is_none()) return false;
  nb::object name = nb::getattr(dtype, "name", nb::none());
  return nb::isinstance<nb::str>(name) && nb::cast<std::string_view>(name) == "bfloat16";
}

std::size_t element_bytes(convjit_dtype dtype) {
  return dtype == CONVJIT_FLOAT64 ? 8 : dtype == CONVJIT_FLOAT32 ? 4 : 2;
}

void free_aligned(void* p) noexcept { std::free(p); }

template <typename FrameworkTag>
nb::object export_as(void* data, const std::array<std::int64_t, 4>& shape, nb::handle owner,
                     nb::dlpack::dtype dtype) {
  const std::size_t dims[4] = {
      static_cast<std::size_t>(shape[0]), static_cast<std::size_t>(shape[1]),
      static_cast<std::size_t>(shape[2]), static_cast<std::size_t>(shape[3])};
  nb::ndarray<FrameworkTag> array(data, 4, dims, owner, nullptr, dtype, nb::device::cpu::value, 0);
  return array.cast(nb::rv_policy::reference);
}

nb::dlpack::dtype dlpack_dtype(convjit_dtype dtype) {
  nb::dlpack::dtype dt;
  dt.lanes = 1;
  switch (dtype) {
    case CONVJIT_HALF:
      dt.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float);
      dt.bits = 16;
      break;
    case CONVJIT_BFLOAT16:
      dt.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat);
      dt.bits = 16;
      break;
    case CONVJIT_FLOAT32:
      dt.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float);
      dt.bits = 32;
      break;
    case CONVJIT_FLOAT64:
      dt.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float);
      dt.bits = 64;
      break;
  }
  return dt;
}

}  // namespace

std::string Device::name() const { return is_cuda() ? "cuda:" + std::to_string(id) : "cpu"; }

convjit_tensor Array::tensor() const {
  convjit_tensor t{};
  t.dtype = dtype;
  t.rank = 4;
  for (int i = 0; i < 4; ++i) t.shape[i] = shape[static_cast<std::size_t>(i)];
  t.data = data();
  return t;
}

void set_error_type(nb::handle type) { g_error_type = type.ptr(); }

void raise_error(const std::string& message, const char* status) {
  PyObject* type = g_error_type ? g_error_type : PyExc_ValueError;
  PyObject* error = PyObject_CallFunction(type, "s", message.c_str());
  if (error != nullptr) {
    PyObject* name = PyUnicode_FromString(status);
    if (name != nullptr) PyObject_SetAttrString(error, "status", name);
    Py_XDECREF(name);
    PyErr_SetObject(type, error);
    Py_DECREF(error);
  }
  throw nb::python_error();
}

const char* dtype_name(convjit_dtype dtype) {
  switch (dtype) {
    case CONVJIT_HALF:
      return "float16";
    case CONVJIT_BFLOAT16:
      return "bfloat16";
    case CONVJIT_FLOAT32:
      return "float32";
    case CONVJIT_FLOAT64:
      return "float64";
  }
  return "unknown";
}

const char* tf_dtype_name(convjit_dtype dtype) {
  switch (dtype) {
    case CONVJIT_HALF:
      return "half";
    case CONVJIT_BFLOAT16:
      return "bfloat16";
    case CONVJIT_FLOAT32:
      return "float";
    case CONVJIT_FLOAT64:
      return "double";
  }
  return "unknown";
}

convjit_dtype parse_dtype(nb::handle dtype) {
  std::string name;
  if (nb::isinstance<nb::str>(dtype)) {
    name = nb::cast<std::string>(dtype);
  } else if (nb::object attr = nb::getattr(dtype, "name", nb::none());
             nb::isinstance<nb::str>(attr)) {
    name = nb::cast<std::string>(attr);  // NumPy / ml_dtypes / TensorFlow dtype objects
  } else if (PyType_Check(dtype.ptr())) {
    name = nb::cast<std::string>(dtype.attr("__name__"));  // numpy.float16, ml_dtypes.bfloat16
  } else {
    name = nb::cast<std::string>(nb::str(dtype));  // torch.float32 -> "torch.float32"
  }
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name == "float16" || name == "half") return CONVJIT_HALF;
  if (name == "bfloat16") return CONVJIT_BFLOAT16;
  if (name == "float32" || name == "float") return CONVJIT_FLOAT32;
  if (name == "float64" || name == "double") return CONVJIT_FLOAT64;
  refuse_dtype(name);
}

Array import_array(nb::handle object, const char* name, const std::string& op, bool writable) {
  Array array;
  array.source = nb::borrow(object);
  array.framework = framework_of(object);
  bool bfloat16_words = false;
  if (!nb::try_cast(object, array.view, /*convert=*/false)) {
    if (array.framework == Framework::kNumpy && is_numpy_bfloat16(object)) {
      nb::object words = object.attr("view")("uint16");
      if (!nb::try_cast(words, array.view, false))
        raise_error(std::string(name) + ": cannot read this bfloat16 array");
      bfloat16_words = true;
    } else {
      nb::object type_name = nb::getattr(
          nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(object.ptr()))), "__name__", nb::str("?"));
      raise_error(op + ": " + name +
                  " must be an array (an object with __dlpack__ or the buffer protocol: NumPy, "
                  "PyTorch, JAX, TensorFlow, CuPy), but got " +
                  nb::cast<std::string>(nb::str(type_name)));
    }
  }
  const nb::ndarray<nb::ro>& v = array.view;
  if (bfloat16_words) {
    array.dtype = CONVJIT_BFLOAT16;
  } else if (!to_convjit_dtype(v.dtype(), &array.dtype)) {
    refuse_dtype(dlpack_dtype_name(v.dtype()));
  }
  if (v.ndim() != 4) {
    raise_error(op + ": " + name + " must be 4-dimensional, but got shape " +
                shape_text(v.shape_ptr(), v.ndim()));
  }
  for (std::size_t i = 0; i < 4; ++i) array.shape[i] = static_cast<std::int64_t>(v.shape(i));
  // Row-major (C order) only; a dimension of size 1 (or an empty array) may have any stride.
  std::int64_t expected = 1;
  const bool empty =
      array.shape[0] == 0 || array.shape[1] == 0 || array.shape[2] == 0 || array.shape[3] == 0;
  for (int i = 3; i >= 0; --i) {
    const auto d = static_cast<std::size_t>(i);
    if (!empty && array.shape[d] != 1 && v.stride(d) != expected) {
      std::int64_t strides[4];
      for (std::size_t k = 0; k < 4; ++k) strides[k] = v.stride(k);
      raise_error(op + ": " + name + " must be C-contiguous (row-major), but its strides are " +
                  shape_text(strides, 4) + " elements for shape " +
                  shape_text(array.shape.data(), 4) +
                  "; pass a contiguous copy (numpy.ascontiguousarray, tensor.contiguous())");
    }
    expected *= array.shape[d];
  }
  array.bytes = static_cast<std::size_t>(expected) * element_bytes(array.dtype);
  const int type = v.device_type();
  if (type == nb::device::cpu::value || type == nb::device::cuda_host::value ||
      type == nb::device::cuda_managed::value) {
    array.device = Device{nb::device::cpu::value, 0};
  } else if (type == nb::device::cuda::value) {
    array.device = Device{type, v.device_id()};
  } else {
    raise_error(op + ": " + name + " is on DLPack device type " + std::to_string(type) +
                "; convjit runs on the CPU and on CUDA GPUs");
  }
  if (writable) {
    if (array.framework == Framework::kJax || array.framework == Framework::kTensorflow) {
      raise_error(op +
                  ": out must be a writable array (NumPy, PyTorch, CuPy); JAX and TensorFlow "
                  "arrays are immutable, so leave out=None and use the returned array");
    }
    if (array.framework == Framework::kNumpy) {
      nb::object flags = object.attr("flags");
      if (!nb::cast<bool>(flags.attr("writeable"))) raise_error(op + ": out is a read-only array");
    }
  }
  return array;
}

Output make_output(Framework framework, convjit_dtype dtype,
                   const std::array<std::int64_t, 4>& shape, const Device& device) {
  Output out;
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  const std::size_t bytes = static_cast<std::size_t>(count) * element_bytes(dtype);
  if (device.is_cuda()) {
    // Device memory comes from the caller's framework, on its allocator and device.
    std::string device_name = device.name();
    if (framework == Framework::kTorch) {
      nb::module_ torch = nb::module_::import_("torch");
      nb::object torch_dtype = torch.attr(dtype_name(dtype));
      out.object =
          torch.attr("empty")(nb::make_tuple(shape[0], shape[1], shape[2], shape[3]),
                              nb::arg("dtype") = torch_dtype, nb::arg("device") = device_name);
    } else if (framework == Framework::kCupy && dtype != CONVJIT_BFLOAT16) {
      nb::module_ cupy = nb::module_::import_("cupy");
      nb::object guard = cupy.attr("cuda").attr("Device")(device.id);
      guard.attr("__enter__")();
      out.object = cupy.attr("empty")(nb::make_tuple(shape[0], shape[1], shape[2], shape[3]),
                                      nb::arg("dtype") = dtype_name(dtype));
      guard.attr("__exit__")(nb::none(), nb::none(), nb::none());
    } else {
      raise_error(std::string("a result on ") + device_name +
                  " is allocated through PyTorch or CuPy; for other arrays pass out=");
    }
    nb::ndarray<> view;
    if (!nb::try_cast(out.object, view, false)) raise_error("cannot read the allocated result");
    out.data = view.data();
    return out;
  }
  // Host memory on a cache line, owned by a capsule: the framework wraps it without a copy.
  void* data = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (data == nullptr) throw std::bad_alloc();
  nb::capsule owner(data, &free_aligned);
  out.data = data;
  const nb::dlpack::dtype dt = dlpack_dtype(dtype);
  switch (framework) {
    case Framework::kTorch:
      out.object = export_as<nb::pytorch>(data, shape, owner, dt);
      break;
    case Framework::kJax:
      out.object = export_as<nb::jax>(data, shape, owner, dt);
      break;
    case Framework::kTensorflow:
      out.object = export_as<nb::tensorflow>(data, shape, owner, dt);
      break;
    case Framework::kCupy:  // a host result for host inputs: NumPy
    case Framework::kNumpy:
    case Framework::kOther:
      if (dtype == CONVJIT_BFLOAT16) {
        nb::dlpack::dtype words = nb::dtype<std::uint16_t>();
        nb::object raw = export_as<nb::numpy>(data, shape, owner, words);
        out.object = raw.attr("view")(nb::module_::import_("ml_dtypes").attr("bfloat16"));
      } else {
        out.object = export_as<nb::numpy>(data, shape, owner, dt);
      }
      break;
  }
  return out;
}

void* current_stream(Framework framework, const Device& device) {
  if (!device.is_cuda()) return nullptr;
  if (framework == Framework::kTorch) {
    nb::object stream =
        nb::module_::import_("torch").attr("cuda").attr("current_stream")(device.id);
    return reinterpret_cast<void*>(nb::cast<std::uintptr_t>(stream.attr("cuda_stream")));
  }
  if (framework == Framework::kCupy) {
    nb::module_ cupy = nb::module_::import_("cupy");
    nb::object guard = cupy.attr("cuda").attr("Device")(device.id);
    guard.attr("__enter__")();
    nb::object stream = cupy.attr("cuda").attr("get_current_stream")();
    guard.attr("__exit__")(nb::none(), nb::none(), nb::none());
    return reinterpret_cast<void*>(nb::cast<std::uintptr_t>(stream.attr("ptr")));
  }
  return nullptr;  // JAX and TensorFlow expose no stream: the default stream
}

}  // namespace convjit::python
