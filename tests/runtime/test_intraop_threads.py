"""Device kernels use the intra-op thread count of the thread that launched them.

OpenMP's thread count is a per-thread setting: a stream's worker thread kept the count it
first saw, so ``torch.set_num_threads(1)`` after the first device op (as ``torchneuron
check`` sets while timing) left the emulated core on two OpenMP threads. Counted here by
the threads named after the stream (OpenMP's helpers inherit the worker's name) that
consumed CPU while the device worked: no timing is asserted."""

from conftest import run_python

CODE = """
import os, torch, torchneuron

def busy_threads(work):
    # threads named like the stream's worker, and the CPU ns each consumed during work()
    def cpu():
        out = {}
        for t in os.listdir("/proc/self/task"):
            try:
                if open(f"/proc/self/task/{t}/comm").read().strip() != "neuron0:s0":
                    continue
                out[t] = int(open(f"/proc/self/task/{t}/schedstat").read().split()[0])
            except OSError:
                pass
        return out
    a = cpu()
    work()
    b = cpu()
    return sum(1 for t in b if b[t] - a.get(t, 0) > 2_000_000)   # more than 2 ms of CPU

x = torch.randn(512, 2048, device="neuron")

def work():
    for _ in range(40):
        torch.tanh(x)
    torch.neuron.synchronize()

torch.set_num_threads(2)
work()                                   # the worker starts with a team of two
two = busy_threads(work)
torch.set_num_threads(1)
one = busy_threads(work)
torch.set_num_threads(2)
two_again = busy_threads(work)
print(two, one, two_again)
"""


def test_kernels_follow_the_launching_threads_intraop_count():
    out = run_python(CODE).stdout.split()
    two, one, two_again = map(int, out[-3:])
    assert one == 1, out
    # the count can see OpenMP's helper (not a vacuous 1): two threads worked with two
    assert two == 2 and two_again == 2, out


GLOBAL_CODE = """
import threading, torch, torchneuron

def fresh_thread_count():
    # a new thread starts from ATen's process-wide count
    out = []
    t = threading.Thread(target=lambda: out.append(torch.get_num_threads()))
    t.start(); t.join()
    return out[0]

x = torch.randn(256, 1024, device="neuron")
torch.neuron.synchronize()               # the worker's first kernel (its own set-up) is done
torch.set_num_threads(1)
ready, go = threading.Event(), threading.Event()

def launcher():
    torch.get_num_threads()              # this thread's count is now 1, ATen's global value then
    ready.set(); go.wait()
    for _ in range(5):
        torch.tanh(x)                    # launched with 1 thread while the process-wide count is 2
    torch.neuron.synchronize()

t = threading.Thread(target=launcher); t.start(); ready.wait()
torch.set_num_threads(2)
torch.tanh(x); torch.neuron.synchronize()   # the worker now runs with 2
go.set(); t.join()                          # ... then with the launcher's 1
print(torch.get_num_threads(), fresh_thread_count())
"""


def test_kernels_leave_the_process_wide_count_alone():
    # a stream worker that follows a launching thread's count must set it for itself only:
    # the user's torch.get_num_threads(), and the count new threads start from, stay 2
    main, fresh = map(int, run_python(GLOBAL_CODE).stdout.split()[-2:])
    assert (main, fresh) == (2, 2)


OTHER_THREAD_CODE = """
import threading, torch, torchneuron
dev = "DEVICE"
y = torch.ones(4, device=dev)            # the main thread's only op: no CPU parallel region
def other():
    torch.set_num_threads(1)             # ATen's process-wide count, from another thread
    x = torch.randn(256, 1024, device=dev)
    torch.tanh(x)
    if dev == "neuron":
        torch.neuron.synchronize()
t = threading.Thread(target=other); t.start(); t.join()
print(torch.get_num_threads())
"""


def test_a_launch_leaves_the_launching_threads_count_to_aten():
    # ATen fixes a thread's count lazily (its first parallel region or get_num_threads()) from
    # the process-wide value of that moment. On the CPU the main thread above reads the other
    # thread's 1; a device launch must not fix the main thread's count earlier (it read 2).
    cpu, neuron = (
        int(run_python(OTHER_THREAD_CODE.replace("DEVICE", dev)).stdout.split()[-1])
        for dev in ("cpu", "neuron")
    )
    assert neuron == cpu == 1
