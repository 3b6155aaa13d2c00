// convjit._convjit: the compiled half of the Python package. The Python half (convjit/*.py)
// gives the functions their TensorFlow signatures and documentation and calls these.
#include <convjit/cache.h>
#include <convjit/convjit.h>
#include <convjit/version.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "arrays.hpp"
#include "kernel.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace convjit::python {
namespace {

// Integers from any sequence of Python ints, NumPy integers or 0-d tensors (__index__).
std::vector<std::int64_t> int_list(nb::handle values, const char* name) {
  std::vector<std::int64_t> out;
  if (values.is_none()) return out;
  if (nb::isinstance<nb::str>(values) || nb::isinstance<nb::bytes>(values) ||
      (!PySequence_Check(values.ptr()) && !nb::hasattr(values, "__iter__"))) {
    raise_error(std::string(name) + " must be a list of integers, but got " +
                nb::cast<std::string>(nb::repr(values)));
  }
  for (nb::handle item : values) {
    PyObject* index = PyNumber_Index(item.ptr());
    if (index == nullptr) {
      PyErr_Clear();
      if (nb::isinstance<nb::str>(item) || nb::isinstance<nb::bytes>(item)) {
        raise_error(std::string(name) + " must be a list of integers, but holds " +
                    nb::cast<std::string>(nb::repr(item)));
      }
      nb::object as_int = nb::steal(PyNumber_Long(item.ptr()));  // 0-d tensors
      if (!as_int.is_valid()) {
        PyErr_Clear();
        raise_error(std::string(name) + " must be a list of integers, but holds " +
                    nb::cast<std::string>(nb::repr(item)));
      }
      index = as_int.release().ptr();
    }
    long long v = PyLong_AsLongLong(index);
    Py_DECREF(index);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      raise_error(std::string(name) + " holds an integer out of the int64 range");
    }
    out.push_back(v);
  }
  return out;
}

std::string text_attr(nb::handle value, const char* name) {
  if (nb::isinstance<nb::str>(value)) return nb::cast<std::string>(value);
  if (nb::isinstance<nb::bytes>(value)) return std::string(nb::cast<nb::bytes>(value).c_str());
  raise_error(std::string(name) + " must be a string, but got " +
              nb::cast<std::string>(nb::repr(value)));
}

// Kernels of the TensorFlow-shaped functions by descriptor: a repeated call costs a lookup,
// not a compile() (which would validate and hash the descriptor again).
class KernelMemo {
 public:
  std::shared_ptr<Kernel> get(const CompileRequest& r) {
    std::string key = r.op + '|' + std::to_string(r.dtype) + '|' + r.device + '|' + r.padding +
                      '|' + r.data_format;
    for (const auto* v :
         {&r.input, &r.filter, &r.out_backprop, &r.strides, &r.dilations, &r.explicit_paddings}) {
      key += '|';
      for (std::int64_t x : *v) key += std::to_string(x) + ',';
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
    }
    std::shared_ptr<Kernel> kernel = Kernel::compile(r);  // releases the GIL while compiling
    std::lock_guard<std::mutex> lock(mutex_);
    if (kernels_.size() >= kCapacity) kernels_.clear();  // convjit's own caches still hold them
    kernels_.emplace(std::move(key), kernel);
    return kernel;
  }

 private:
  static constexpr std::size_t kCapacity = 4096;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Kernel>> kernels_;
};

KernelMemo& memo() {
  static KernelMemo* instance = new KernelMemo();  // never destroyed: safe at interpreter exit
  return *instance;
}

// One TensorFlow-shaped call: the descriptor from the arrays' shapes and the attributes, the
// kernel from the memo, then a run.
nb::object call_op(const std::string& op_text, nb::handle sizes, nb::handle a, nb::handle b,
                   nb::handle strides, nb::handle padding, nb::handle explicit_paddings,
                   nb::handle data_format, nb::handle dilations, nb::handle out) {
  const OpKind op = parse_op(op_text);
  const OperandNames names = operand_names(op);
  const std::string tf_name(op_name(op));
  const Array first = import_array(a, names.a, tf_name, false);
  const Array second = import_array(b, names.b, tf_name, false);
  if (second.dtype != first.dtype) {
    raise_error("cannot compute " + tf_name + " as input #" + std::to_string(names.b_index) +
                "(zero-based) was expected to be a " + tf_dtype_name(first.dtype) +
                " tensor but is a " + tf_dtype_name(second.dtype) + " tensor");
  }
  if (!(second.device == first.device)) {
    raise_error(tf_name + ": " + names.a + " is on " + first.device.name() + " but " + names.b +
                " is on " + second.device.name());
  }
  CompileRequest r;
  r.op = tf_name;
  r.dtype = first.dtype;
  r.device = first.device.name();
  r.padding = text_attr(padding, "padding");
  r.data_format = text_attr(data_format, "data_format");
  r.strides = int_list(strides, "strides");
  r.dilations = int_list(dilations, "dilations");
  r.explicit_paddings = int_list(explicit_paddings, "explicit_paddings");
  const std::vector<std::int64_t> a_shape(first.shape.begin(), first.shape.end());
  const std::vector<std::int64_t> b_shape(second.shape.begin(), second.shape.end());
  if (takes_input_sizes(op)) {
    r.input = int_list(sizes, "input_sizes");
    r.filter = a_shape;
    r.out_backprop = b_shape;
  } else if (takes_filter_sizes(op)) {
    r.input = a_shape;
    r.filter = int_list(sizes, "filter_sizes");
    r.out_backprop = b_shape;
  } else {
    r.input = a_shape;
    r.filter = b_shape;
  }
  std::shared_ptr<Kernel> kernel = memo().get(r);
  return kernel->run_arrays(first, second, out);
}

nb::object compile_kernel(const std::string& op, nb::handle dtype, const std::string& device,
                          const std::string& backend, int num_threads, nb::handle input,
                          nb::handle filter, nb::handle out_backprop, nb::handle strides,
                          nb::handle padding, nb::handle explicit_paddings, nb::handle data_format,
                          nb::handle dilations) {
  CompileRequest r;
  r.op = op;
  r.dtype = parse_dtype(dtype);
  r.device = device;
  r.backend = backend;
  r.num_threads = num_threads;
  r.input = int_list(input, "input");
  r.filter = int_list(filter, "filter");
  r.out_backprop = int_list(out_backprop, "out_backprop");
  r.strides = int_list(strides, "strides");
  r.dilations = int_list(dilations, "dilations");
  r.explicit_paddings = int_list(explicit_paddings, "explicit_paddings");
  r.padding = text_attr(padding, "padding");
  r.data_format = text_attr(data_format, "data_format");
  return nb::cast(Kernel::compile(r));
}

std::string take_json(convjit_status status, char* json) {
  if (status != CONVJIT_OK) raise_status(status);
  std::string text = json ? json : "null";
  convjit_free_string(json);
  return text;
}

std::string cache_list() {
  char* json = nullptr;
  convjit_status status;
  {
    nb::gil_scoped_release release;
    status = convjit_cache_list_json(&json);
  }
  return take_json(status, json);
}

std::string cache_stats() {
  char* json = nullptr;
  convjit_status status;
  {
    nb::gil_scoped_release release;
    status = convjit_cache_stats_json(&json);
  }
  return take_json(status, json);
}

std::string cache_purge(bool all, std::int64_t older_than_seconds,
                        std::optional<std::int64_t> max_bytes, const std::string& op,
                        const std::string& dtype, const std::string& backend,
                        const std::string& isa) {
  convjit_cache_purge_options options{};
  options.all = all ? 1 : 0;
  options.older_than_seconds = older_than_seconds;
  options.has_max_bytes = max_bytes.has_value() ? 1 : 0;
  options.max_bytes = max_bytes.value_or(0);
  options.op = op.empty() ? nullptr : op.c_str();
  options.dtype = dtype.empty() ? nullptr : dtype.c_str();
  options.backend = backend.empty() ? nullptr : backend.c_str();
  options.isa = isa.empty() ? nullptr : isa.c_str();
  char* json = nullptr;
  convjit_status status;
  {
    nb::gil_scoped_release release;
    status = convjit_cache_purge(&options, &json);
  }
  return take_json(status, json);
}

nb::tuple shape_tuple(const std::array<std::int64_t, 4>& s) {
  return nb::make_tuple(s[0], s[1], s[2], s[3]);
}

}  // namespace
}  // namespace convjit::python

NB_MODULE(_convjit, m) {
  using namespace convjit::python;
  m.doc() = "convjit's compiled core; use the convjit package, not this module.";

  PyObject* error = PyErr_NewExceptionWithDoc(
      "convjit.Error",
      "A convjit failure: a bad argument (dtype, layout, shape, attribute) or an op convjit\n"
      "refuses, with TensorFlow's message text. A ValueError; `status` names the C ABI status\n"
      "(INVALID_ARGUMENT, UNIMPLEMENTED, UNAVAILABLE, INTERNAL, ...).",
      PyExc_ValueError, nullptr);
  m.attr("Error") = nb::steal(error);
  set_error_type(m.attr("Error"));
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "convjit: out of memory");
    }
  });

  m.attr("__version__") = convjit_version();
  m.attr("HEADER_VERSION") = CONVJIT_VERSION_STRING;

  nb::class_<Kernel>(m, "Kernel",
                     "A compiled op instance (from convjit.compile). Immutable and thread-safe:\n"
                     "run() may be called from many threads at once.")
      .def(
          "run",
          [](const Kernel& k, nb::args arrays, nb::handle out, std::uintptr_t parallel_for) {
            if (arrays.size() != 2) {
              raise_error("Kernel.run takes 2 arrays (" + std::string(k.operands().a) + ", " +
                          k.operands().b + " for " + k.op() + "), but got " +
                          std::to_string(arrays.size()));
            }
            return k.run(arrays[0], arrays[1], out,
                         reinterpret_cast<convjit_parallel_for_fn>(parallel_for));
          },
          "arrays"_a, nb::kw_only(), "out"_a = nb::none(), "parallel_for"_a = 0,
          "run(*arrays, out=None, parallel_for=0)\n\n"
          "Runs the op on its two operands in TensorFlow's argument order (filter and "
          "out_backprop\n"
          "for the input gradients; input and out_backprop for the filter gradients; input and\n"
          "filter for the forward ops). The result is a new array of the first operand's kind, or\n"
          "`out` written in place. The GIL is released while the kernel runs.\n\n"
          "parallel_for: for framework adapters, the address (an int, e.g. from ctypes) of a\n"
          "C function with convjit_parallel_for_fn's signature (convjit.h) that runs the CPU\n"
          "kernel's parallel loops on the framework's thread pool, for this run only; 0: convjit's\n"
          "pool.")
      .def_prop_ro("name", &Kernel::name, "Self-describing kernel name (ISA, dtype, blocking).")
      .def_prop_ro("backend", &Kernel::backend,
                   "The backend that generated it: 'x86', 'interpreter', ...")
      .def_prop_ro("device", &Kernel::device, "Where it runs: 'cpu', 'cuda:0', ...")
      .def_prop_ro("descriptor", &Kernel::descriptor,
                   "The canonical descriptor text it was compiled from.")
      .def_prop_ro("workspace_bytes", &Kernel::workspace_bytes,
                   "Device workspace one run needs (0 on the CPU).")
      .def_prop_ro("op", &Kernel::op, "TensorFlow's op name.")
      .def_prop_ro(
          "dtype", [](const Kernel& k) { return std::string(dtype_name(k.dtype())); },
          "'float16', 'bfloat16', 'float32' or 'float64'.")
      .def_prop_ro(
          "operand_shapes",
          [](const Kernel& k) {
            return nb::make_tuple(shape_tuple(k.operand_shape(0)), shape_tuple(k.operand_shape(1)),
                                  shape_tuple(k.operand_shape(2)));
          },
          "Shapes of the two operands and of the result.")
      .def("__repr__", [](const Kernel& k) {
        return "<convjit.Kernel " + k.name() + " backend=" + k.backend() + " device=" + k.device() +
               ">";
      });

  m.def("compile_kernel", &compile_kernel, "op"_a, "dtype"_a, "device"_a, "backend"_a,
        "num_threads"_a, "input"_a.none(), "filter"_a.none(), "out_backprop"_a.none(),
        "strides"_a.none(), "padding"_a.none(), "explicit_paddings"_a.none(),
        "data_format"_a.none(), "dilations"_a.none());
  m.def("call_op", &call_op, "op"_a, "sizes"_a.none(), "a"_a.none(), "b"_a.none(),
        "strides"_a.none(), "padding"_a.none(), "explicit_paddings"_a.none(),
        "data_format"_a.none(), "dilations"_a.none(), "out"_a.none());
  m.def("cache_list_json", &cache_list);
  m.def("cache_stats_json", &cache_stats);
  m.def("cache_purge_json", &cache_purge, "all"_a, "older_than_seconds"_a, "max_bytes"_a.none(),
        "op"_a, "dtype"_a, "backend"_a, "isa"_a);
}
