//! `sonda model`: a JMT queueing model (JSIMgraph `.jsimg` XML) of the recorded run.
//!
//! ```text
//!              λ_c (Poisson)       PS, servers = CPUs      (V_c - 1)/V_c        delay
//!   Source ──────────────────▶ CPU ──────────────────────────────────▶ Blocked ──┐
//!                               ▲  └── 1/V_c ──▶ Sink                             │
//!                               └─────────────────────────────────────────────────┘
//! ```
//!
//! - One open class per request method: a method with outermost calls (depth 1), its
//!   measured arrival rate as a Poisson source (`Exponential(λ)` inter-arrival times).
//! - Its structure follows the trace: a call that blocked `k` times (`S`/`D` between two
//!   stretches on a CPU, [`CallRecord::blocked_phases`]) made `k + 1` CPU visits; the
//!   class makes `V_c` visits on average, routed back from `Blocked` to the CPU.
//! - `CPU`: processor sharing with as many servers as the machine's CPUs; each class's
//!   service time per visit is its CPU demand per call (the CPU time the kernel charged
//!   it, steal left out) split over its visits, the best
//!   fit among exponential, Erlang and lognormal (the families JMT and LINE's analytic
//!   solvers both read), scaled to keep the measured mean exactly.
//! - `Blocked`: a delay station with the class's blocked time (`S + D`) per phase.
//! - The background load beside the calls ([`BackgroundLoad`]): an open class for the
//!   CPU time of untraced work and of tasks the trace does not follow and for the time
//!   the hypervisor stole from the calls, and a closed
//!   class with one job per CPU-bound foreign task (always runnable: it takes its
//!   share of the CPUs at any load, which arrivals would not).
//!
//! Time waiting for a CPU is not an input: the PS station predicts it. With
//! [`ModelOptions::run_queues`] the CPUs are modelled as the kernel runs them instead
//! ([`RunQueues`]: a round-robin queue per CPU, wake-up placement, the worker pool as
//! a finite capacity region), which takes the first two items below into account.
//! Left out of the PS model, and what each costs on ServiceDemo (2 CPUs, measured on
//! a quiet machine, LINE MVA):
//! - the recorded run's bounded worker pool: the open classes let any number of calls
//!   share the CPUs, the 6 workers of ServiceDemo at 70% load do not (calls wait in
//!   the executor's queue, outside the measured response time): +50% predicted for
//!   browse, +8-16% for the others; with 24 workers, +10%, -5%, -19%;
//! - the scheduler's wakeups: a thread woken from a sleep or an I/O while the CPUs are
//!   busy waits for a running one's slice, where processor sharing serves it at once.
//!   A class with many short visits waits more than its demand says: checkout (5
//!   visits) -11% to -28%, and beside a CPU-bound task, whose CPU a woken worker
//!   often waits for instead of the idle one, -22% to -33%;
//! - group scheduling (autogroups): CPU-bound tasks of another session share the CPUs
//!   as one group, not each as a job.
//!
//! With [`ModelOptions::replayer`], service times are JMT `Replayer` distributions
//! reading the measured per-call samples instead (JMT only: other readers ignore or
//! refuse them). The sample files are written either way, one value in seconds a line.

use std::borrow::Cow;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use crate::fit::{fit, Family, Params};
use crate::join::CallRecord;
use crate::summary::sorted;

/// The families a model uses.
pub const MODEL_FAMILIES: [Family; 3] = [Family::Exponential, Family::Erlang, Family::Lognormal];

/// How to build the model.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ModelOptions {
    /// Use JMT `Replayer` distributions over the measured samples.
    pub replayer: bool,
    /// The CPUs as the kernel runs them ([`RunQueues`]) instead of one
    /// processor-sharing station.
    pub run_queues: bool,
}

impl ModelOptions {
    /// Uses Replayer distributions.
    pub fn with_replayer(mut self, on: bool) -> ModelOptions {
        self.replayer = on;
        self
    }

    /// Models the CPUs as per-CPU round-robin run queues ([`RunQueues`]).
    pub fn with_run_queues(mut self, on: bool) -> ModelOptions {
        self.run_queues = on;
        self
    }
}

/// The CPUs as the kernel runs them, for a simulator (LINE's LDES, JMT): the
/// analytic solvers do not take join-the-shortest-queue routing or finite capacity
/// regions.
///
/// - One FCFS station per CPU, served round robin: a job holds its CPU for a slice
///   of `quantum_s` on average (exponential), then goes back to the tail of the same
///   CPU's queue until its visit's demand is served (a geometric number of slices
///   with the visit's mean). A visit that needs less than a slice takes its own
///   demand. Processor sharing gives a short visit a short wait; a woken thread on
///   Linux waits for the running one's slice, whatever its own demand.
/// - A job is placed on a CPU when it arrives or wakes up, on the one with the
///   fewest jobs (the kernel's wake-up placement looks for an idle CPU), and stays
///   there for its visit (the kernel does not move a running or just-preempted
///   thread). A CPU-bound task with no time away stays on its CPU for good.
/// - The traced calls run on a pool of `workers` threads (when the trace shows the
///   calls reusing a fixed set of threads): a finite capacity region over the CPUs
///   and the blocked delay admits that many calls at once; the others wait outside,
///   in the executor's queue, which the measured response time does not include.
///   Background classes do not count against it (their weight is 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunQueues {
    /// The mean time slice (s): the mean stretch of a traced thread that ended in a
    /// preemption ([`crate::figures::Background::preempted_stretch_ns`]).
    pub quantum_s: f64,
    /// The worker threads that ran the calls, when they are a reused pool.
    pub workers: Option<u32>,
    /// A CPU-bound task's slice (s): deterministic, twice the mean wait of a traced
    /// thread queued behind one ([`BackgroundLoad::cpu_bound_held_wait_s`]), so that a
    /// job that finds it on the CPU waits as long as measured on average (half a
    /// slice); its mean stretch when none was measured.
    pub cpu_bound_slice_s: f64,
    /// The share of the traced threads' wakeups the kernel placed on the CPU of a
    /// CPU-bound task ([`BackgroundLoad::cpu_bound_wakeup_share`]), when there is one.
    pub cpu_bound_wakeup_share: Option<f64>,
}

/// A slice when the trace saw no preemption (s): Linux's default minimum granularity
/// scaled for a few CPUs.
const DEFAULT_QUANTUM_S: f64 = 0.00075;

/// A pool is taken to be fixed when its threads ran at least this many calls each on
/// average (a thread per call runs one).
const POOL_MIN_CALLS_PER_THREAD: f64 = 4.0;

/// A service time in the model.
#[derive(Clone, Debug, PartialEq)]
pub enum Service {
    /// A fitted distribution.
    Fitted(Params),
    /// A constant (all measured values equal, or too few to fit).
    Deterministic(f64),
    /// JMT's Replayer over a sample file.
    Replayer(PathBuf),
}

impl Service {
    /// The best fit of the model's families to the positive values of `sorted_s`, with
    /// their measured mean kept exactly: utilisations, and in a product-form network
    /// the mean response times, depend on the means alone. Exponential and Erlang fits
    /// are made from the mean already; a lognormal keeps its fitted `sigma` (the shape)
    /// and takes `mu = ln(mean) - sigma^2 / 2` (its maximum-likelihood `mu` gives the
    /// mean of a heavy-tailed sample a few percent off).
    fn from_samples(sorted_s: &[f64]) -> Service {
        let fits = fit(sorted_s);
        let pos: Vec<f64> = sorted_s.iter().copied().filter(|&x| x > 0.0).collect();
        let mean = pos.iter().sum::<f64>() / pos.len().max(1) as f64;
        match fits.best_of(&MODEL_FAMILIES) {
            Some(f) => Service::Fitted(match f.params {
                Params::Lognormal { sigma, .. } => Params::Lognormal {
                    mu: mean.ln() - sigma * sigma / 2.0,
                    sigma,
                },
                p => p,
            }),
            None => {
                if pos.len() > 1 && pos[0] != pos[pos.len() - 1] {
                    Service::Fitted(Params::Exponential { rate: 1.0 / mean })
                } else {
                    Service::Deterministic(mean)
                }
            }
        }
    }

    /// The same shape with mean `mean` (s): scale-free families rescaled, a lognormal
    /// shifted; a Replayer as it is.
    fn with_mean(self, mean: f64) -> Service {
        match self {
            Service::Fitted(Params::Exponential { .. }) => {
                Service::Fitted(Params::Exponential { rate: 1.0 / mean })
            }
            Service::Fitted(Params::Erlang { phases, .. }) => Service::Fitted(Params::Erlang {
                phases,
                rate: phases as f64 / mean,
            }),
            Service::Fitted(Params::Gamma { shape, .. }) => Service::Fitted(Params::Gamma {
                shape,
                scale: mean / shape,
            }),
            Service::Fitted(Params::Lognormal { sigma, .. }) => {
                Service::Fitted(Params::Lognormal {
                    mu: mean.ln() - sigma * sigma / 2.0,
                    sigma,
                })
            }
            Service::Deterministic(_) => Service::Deterministic(mean),
            r @ Service::Replayer(_) => r,
        }
    }

    /// The mean (s), when known without reading a file.
    pub fn mean(&self) -> Option<f64> {
        match self {
            Service::Fitted(p) => Some(p.mean()),
            Service::Deterministic(t) => Some(*t),
            Service::Replayer(_) => None,
        }
    }
}

/// How a class's jobs come and go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Population {
    /// Poisson arrivals at this rate (1/s), leaving when done.
    Open {
        /// Arrival rate (1/s).
        rate: f64,
    },
    /// This many jobs, always in the system: CPU-bound tasks, which are back on the
    /// run queue as soon as they leave a CPU.
    Closed {
        /// The number of jobs.
        jobs: u32,
    },
}

/// One class of the model.
#[derive(Clone, Debug)]
pub struct ModelClass {
    /// Its name: the method's label, or a background class's name.
    pub name: String,
    /// Open with its arrival rate, or closed with its jobs.
    pub population: Population,
    /// Whether it stands for traced calls (else it is background load: untraced
    /// threads of the traced processes and tasks the trace does not follow).
    pub traced: bool,
    /// Mean CPU visits per call: one more than its blocked phases.
    pub visits: f64,
    /// Measured mean CPU demand per call (s), over all its visits.
    pub cpu_mean: f64,
    /// Measured mean CPU of a call's first visit (s), before its first block
    /// ([`CallRecord::first_visit_ns`]): how unlike the others it is tells how far the
    /// even split of `cpu` over the visits is from the trace.
    pub first_visit_mean: f64,
    /// CPU service time of one visit.
    pub cpu: Service,
    /// Mean blocked phases per call (`visits - 1`).
    pub blocked_phases: f64,
    /// Measured mean blocked time per call (s), over all its phases.
    pub blocked_mean: f64,
    /// Blocked time of one phase, when any call blocked.
    pub blocked: Option<Service>,
    /// Measured mean wall time per call (s).
    pub wall_mean: f64,
    /// Calls measured.
    pub calls: u64,
    /// The per-visit CPU samples file.
    pub cpu_samples: PathBuf,
    /// The per-phase blocked samples file.
    pub blocked_samples: PathBuf,
}

impl ModelClass {
    /// The arrival rate of an open class (0 for a closed one).
    pub fn arrival_rate(&self) -> f64 {
        match self.population {
            Population::Open { rate } => rate,
            Population::Closed { .. } => 0.0,
        }
    }

    /// The probability that a job leaving the CPU goes to block (else it is done).
    fn to_blocked(&self) -> f64 {
        match self.population {
            Population::Closed { .. } => 1.0,
            Population::Open { .. } if self.blocked.is_some() => {
                (self.blocked_phases / self.visits).clamp(0.0, 1.0)
            }
            Population::Open { .. } => 0.0,
        }
    }
}

/// The model, ready to write.
#[derive(Clone, Debug)]
pub struct Model {
    /// Its name (the file name).
    pub name: String,
    /// CPUs: the PS station's servers, or the run queues.
    pub cpus: u16,
    /// Per-CPU run queues instead of one PS station.
    pub run_queues: Option<RunQueues>,
    /// The classes.
    pub classes: Vec<ModelClass>,
    /// The per-call sample files the classes name, for the caller to write into the
    /// samples directory (the model only names them: a Replayer reads them from there).
    pub samples: Vec<SampleFile>,
}

/// One file of per-call samples: one value a line, seconds, in call order (as Replayer
/// replays them).
#[derive(Clone, Debug)]
pub struct SampleFile {
    /// Its file name in the samples directory.
    pub name: String,
    /// The samples, ns.
    pub ns: Vec<u64>,
}

impl SampleFile {
    /// Writes the samples to `out`.
    pub fn write(&self, out: impl Write) -> io::Result<()> {
        let mut out = io::BufWriter::new(out);
        for v in &self.ns {
            writeln!(out, "{:.9}", *v as f64 / 1e9)?;
        }
        out.flush()
    }

    /// Whether `name` is a file name sample files get (`NN-LABEL.cpu.txt`,
    /// `NN-LABEL.blocked.txt`): what an old samples directory may hold to be replaced.
    pub fn is_sample_name(name: &std::ffi::OsStr) -> bool {
        let name = name.to_string_lossy();
        let digits = name.bytes().take_while(u8::is_ascii_digit).count();
        digits >= 2
            && name[digits..].starts_with('-')
            && (name.ends_with(".cpu.txt") || name.ends_with(".blocked.txt"))
    }
}

/// The load beside the traced calls, as a model takes it (see
/// [`crate::figures::Background`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BackgroundLoad {
    /// CPU time of untraced work and of tasks not followed that sleep now and then, and
    /// the time the hypervisor stole from the traced calls, in CPUs: an open class of
    /// Poisson arrivals.
    pub open_cpus: f64,
    /// The mean CPU stretch of that work (s): the open class's service time.
    pub open_stretch_s: f64,
    /// CPU-bound tasks not followed: a closed class with that many jobs.
    pub cpu_bound: u32,
    /// Their CPU time, in CPUs.
    pub cpu_bound_cpus: f64,
    /// How many of them were there on average (at most `cpu_bound`): each job thinks
    /// between two visits for as long as keeps it away that share of the time.
    pub cpu_bound_present: f64,
    /// The mean stretch of a traced thread ended by a preemption (s; 0 if none): the
    /// scheduler's slice as the traced threads met it.
    pub preempted_stretch_s: f64,
    /// The mean stretch of a CPU-bound task (s; 0 if none).
    pub cpu_bound_stretch_s: f64,
    /// The mean wait of a traced thread on a CPU a CPU-bound task held (s; 0 if
    /// none waited so).
    pub cpu_bound_held_wait_s: f64,
    /// The share of the traced threads' wakeups placed on a CPU a CPU-bound task was
    /// on (see [`crate::figures::Background::cpu_bound_wakeup_share`]).
    pub cpu_bound_wakeup_share: f64,
}

/// The name of the open background class.
pub const BACKGROUND: &str = "background (untraced)";
/// The name of the closed class of CPU-bound tasks.
pub const CPU_BOUND: &str = "cpu-bound (untraced)";

/// A background stretch when the trace shows none (s): a scheduler slice.
const DEFAULT_STRETCH_S: f64 = 0.001;

/// Splits `n` of something evenly into `k` parts whose sum is `n` (ns).
fn split_even(n: u64, k: u64) -> impl Iterator<Item = u64> {
    let k = k.max(1);
    (0..k).map(move |i| n / k + u64::from(i < n % k))
}

/// Builds the model of `calls` (label, finished calls) observed for `duration_s`,
/// with samples named in `samples_dir` (absolute: a model is read from anywhere; see
/// [`samples_dir`]), which the caller writes from [`Model::samples`]. Pure: it writes
/// nothing.
///
/// A class's structure follows its calls: a call that blocked `k` times (sleep, I/O,
/// a monitor: `S` or `D` between two stretches on a CPU) visits the CPU `k + 1`
/// times and the blocked delay `k` times. The model routes a job from the CPU to the
/// delay with probability `k̄ / (k̄ + 1)` and back, so it makes `k̄ + 1` CPU visits on
/// average, each with `1 / (k̄ + 1)` of the class's CPU demand.
#[allow(clippy::too_many_arguments)]
pub fn build(
    jsimg: &Path,
    samples_dir: &Path,
    calls: &[(&str, &[CallRecord])],
    arrivals_per_s: &[(String, f64)],
    duration_s: f64,
    cpus: u16,
    background: &BackgroundLoad,
    opts: &ModelOptions,
) -> Model {
    let dir = samples_dir;
    let mut samples = Vec::new();
    let mut classes = Vec::new();
    for (i, (label, all)) in calls.iter().enumerate() {
        let top: Vec<&CallRecord> = all.iter().filter(|c| c.depth == 1).collect();
        if top.is_empty() {
            continue;
        }
        let n = top.len() as f64;
        // The CPU station's service is the CPU time the kernel charged the call, what
        // the JVM's clock and the machine's utilisation count. What the hypervisor stole
        // while the call held a virtual CPU is load of its own, in the open background
        // class ([`BackgroundLoad::open_cpus`]): as part of the service it made the
        // predicted utilisation high by about the share stolen (+5 to +10% with 9-13% of
        // the CPUs stolen, ServiceDemo, 2026-12-07). Per visit: each call's time split
        // evenly over its visits (a trace does not tell the model's visits apart).
        let visit_ns: Vec<u64> = top
            .iter()
            .flat_map(|c| split_even(c.inclusive.cpu, u64::from(c.blocked_phases) + 1))
            .collect();
        let phase_ns: Vec<u64> = top
            .iter()
            .filter(|c| c.blocked_phases > 0)
            .flat_map(|c| split_even(c.inclusive.blocked(), u64::from(c.blocked_phases)))
            .collect();
        let cpu_mean = top.iter().map(|c| c.inclusive.cpu as f64).sum::<f64>() / n / 1e9;
        let blocked_mean = top
            .iter()
            .map(|c| c.inclusive.blocked() as f64)
            .sum::<f64>()
            / n
            / 1e9;
        let phases = top.iter().map(|c| f64::from(c.blocked_phases)).sum::<f64>() / n;
        let visits = phases + 1.0;
        let stem = format!("{i:02}-{}", file_safe(label));
        let label = label.to_string();
        let cpu_name = format!("{stem}.cpu.txt");
        let blocked_name = format!("{stem}.blocked.txt");
        let cpu_samples = dir.join(&cpu_name);
        let blocked_samples = dir.join(&blocked_name);
        let rate = arrivals_per_s
            .iter()
            .find(|(l, _)| *l == label)
            .map_or(n / duration_s, |(_, r)| *r * n / all.len() as f64);
        let (cpu_service, blocked_service) = if opts.replayer {
            (
                Service::Replayer(cpu_samples.clone()),
                (!phase_ns.is_empty()).then(|| Service::Replayer(blocked_samples.clone())),
            )
        } else {
            let secs = |v: &[u64]| sorted(v.iter().map(|&x| x as f64 / 1e9));
            (
                Service::from_samples(&secs(&visit_ns)).with_mean(cpu_mean / visits),
                (!phase_ns.is_empty()).then(|| {
                    Service::from_samples(&secs(&phase_ns))
                        .with_mean(blocked_mean / phases.max(f64::MIN_POSITIVE))
                }),
            )
        };
        // Samples in call order, as Replayer replays them.
        samples.push(SampleFile {
            name: cpu_name,
            ns: visit_ns,
        });
        samples.push(SampleFile {
            name: blocked_name,
            ns: phase_ns,
        });
        classes.push(ModelClass {
            name: label.clone(),
            population: Population::Open { rate },
            traced: true,
            visits,
            cpu_mean,
            first_visit_mean: top.iter().map(|c| c.first_visit_ns as f64).sum::<f64>() / n / 1e9,
            cpu: cpu_service,
            blocked_phases: phases,
            blocked_mean,
            blocked: blocked_service,
            wall_mean: top.iter().map(|c| c.inclusive.wall as f64).sum::<f64>() / n / 1e9,
            calls: top.len() as u64,
            cpu_samples,
            blocked_samples,
        });
    }
    if !classes.is_empty() {
        classes.extend(background_classes(background));
    }
    let run_queues = opts.run_queues.then(|| RunQueues {
        quantum_s: if background.preempted_stretch_s > 0.0 {
            background.preempted_stretch_s
        } else {
            DEFAULT_QUANTUM_S
        },
        workers: worker_pool(calls),
        // The stretches of a CPU-bound task are long when nobody else wants its
        // CPU; a model whose woken jobs waited for half of them predicted ServiceDemo
        // 19-69% slow beside one (stretches of 1.2-7.3 ms, waits of 0.4 ms).
        cpu_bound_slice_s: if background.cpu_bound_held_wait_s > 0.0 {
            2.0 * background.cpu_bound_held_wait_s
        } else {
            background.cpu_bound_stretch_s
        },
        cpu_bound_wakeup_share: (background.cpu_bound > 0)
            .then_some(background.cpu_bound_wakeup_share),
    });
    Model {
        name: jsimg
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model.jsimg".into()),
        cpus: cpus.max(1),
        run_queues,
        classes,
        samples,
    }
}

/// The threads that ran the outermost calls, when they are a reused pool (each ran
/// [`POOL_MIN_CALLS_PER_THREAD`] calls or more on average); `None` for a thread per
/// call, or no calls.
fn worker_pool(calls: &[(&str, &[CallRecord])]) -> Option<u32> {
    let mut threads: Vec<sonda_trace::Tid> = calls
        .iter()
        .flat_map(|(_, all)| all.iter().filter(|c| c.depth == 1).map(|c| c.tid))
        .collect();
    let n = threads.len() as f64;
    threads.sort_unstable_by_key(|t| t.0);
    threads.dedup();
    let k = threads.len();
    (k > 0 && n / k as f64 >= POOL_MIN_CALLS_PER_THREAD)
        .then(|| u32::try_from(k).unwrap_or(u32::MAX))
}

/// The classes of the background load: an open class for what sleeps now and then,
/// a closed one for CPU-bound tasks.
fn background_classes(b: &BackgroundLoad) -> Vec<ModelClass> {
    let stretch = if b.open_stretch_s > 0.0 {
        b.open_stretch_s
    } else {
        DEFAULT_STRETCH_S
    };
    let class = |name: &str, population, blocked: Option<Service>| ModelClass {
        name: name.into(),
        population,
        traced: false,
        visits: 1.0,
        cpu_mean: stretch,
        first_visit_mean: stretch,
        cpu: Service::Fitted(Params::Exponential {
            rate: 1.0 / stretch,
        }),
        blocked_phases: 0.0,
        blocked_mean: 0.0,
        blocked,
        wall_mean: 0.0,
        calls: 0,
        cpu_samples: PathBuf::new(),
        blocked_samples: PathBuf::new(),
    };
    let mut v = Vec::new();
    if b.open_cpus > 0.0 {
        v.push(class(
            BACKGROUND,
            Population::Open {
                rate: b.open_cpus / stretch,
            },
            None,
        ));
    }
    if b.cpu_bound > 0 {
        let think = cpu_bound_think_s(b, stretch);
        let mut c = class(
            CPU_BOUND,
            Population::Closed { jobs: b.cpu_bound },
            Some(Service::Deterministic(think)),
        );
        c.blocked_phases = 1.0;
        c.blocked_mean = think;
        v.push(c);
    }
    v
}

/// The delay a CPU-bound job takes between two CPU visits of `stretch` (s). A task
/// there throughout is back on the run queue at once. One that came or went during
/// the period (present `f` of it, running `r` CPUs) is modelled as there `f` of the
/// time: a visit held it for `stretch * f / r` (its stretch at the share it got), so
/// it thinks `stretch * (1 - f) / r` between visits. Summed over the jobs: their
/// absence `jobs - present` over their CPU time. The mean-value solution then mixes
/// the regimes with and without it by the time each lasted, which is what the mean
/// response time over the period does.
fn cpu_bound_think_s(b: &BackgroundLoad, stretch: f64) -> f64 {
    let absent = f64::from(b.cpu_bound) - b.cpu_bound_present;
    if b.cpu_bound_cpus <= 0.0 || absent <= PRESENT_THROUGHOUT * f64::from(b.cpu_bound) {
        ZERO_DELAY_S
    } else {
        stretch * absent / b.cpu_bound_cpus
    }
}

/// Absent for less than this share of the period: there throughout (the first and
/// last stretches are seen only to within a switch of the period's ends).
const PRESENT_THROUGHOUT: f64 = 0.02;

/// The delay a CPU-bound job takes between two CPU visits (s): none, but a solver
/// wants a positive time.
const ZERO_DELAY_S: f64 = 1e-9;

/// Builds the model of an analysed trace (see [`build`]): arrival rates, the
/// observation period and the background load of its whole-run figures.
pub fn model_of(
    analysis: &crate::analyze::Analysis,
    jsimg: &Path,
    samples_dir: &Path,
    opts: &ModelOptions,
) -> Model {
    let s = &analysis.services;
    let calls: Vec<(&str, &[CallRecord])> = analysis.calls().collect();
    let rates: Vec<(String, f64)> = s
        .whole
        .methods
        .iter()
        .map(|m| (m.method.clone(), m.arrival_rate_per_s))
        .collect();
    let bg = &s.background;
    let background = BackgroundLoad {
        open_cpus: bg.untraced_cpus + bg.other_cpus + stolen_cpus(&calls, s.whole.duration_s),
        open_stretch_s: bg.other_stretch_ns / 1e9,
        cpu_bound: bg.cpu_bound_tasks.len() as u32,
        cpu_bound_cpus: bg.cpu_bound_cpus,
        cpu_bound_present: bg.cpu_bound_present,
        preempted_stretch_s: bg.preempted_stretch_ns / 1e9,
        cpu_bound_stretch_s: bg.cpu_bound_stretch_ns / 1e9,
        cpu_bound_held_wait_s: bg.cpu_bound_held_wait_ns / 1e9,
        cpu_bound_wakeup_share: bg.cpu_bound_wakeup_share,
    };
    build(
        jsimg,
        samples_dir,
        &calls,
        &rates,
        s.whole.duration_s,
        s.trace.cpus,
        &background,
        opts,
    )
}

/// What the hypervisor stole from the outermost calls while they held a CPU, in CPUs
/// over `duration_s`: not their service (see [`build`]), but time those CPUs served
/// nobody in the guest, which the model gives the open background class.
fn stolen_cpus(calls: &[(&str, &[CallRecord])], duration_s: f64) -> f64 {
    let stolen_ns: u64 = calls
        .iter()
        .flat_map(|(_, cs)| cs.iter().filter(|c| c.depth == 1))
        .map(|c| c.inclusive.stolen)
        .sum();
    if duration_s > 0.0 {
        stolen_ns as f64 / 1e9 / duration_s
    } else {
        0.0
    }
}

/// `STEM.samples/` next to `STEM.jsimg`.
pub fn samples_dir(jsimg: &Path) -> PathBuf {
    jsimg.with_extension("samples")
}

fn file_safe(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect()
}

const SOURCE: &str = "Source";
const CPU: &str = "CPU";
const BLOCKED: &str = "Blocked";
const SINK: &str = "Sink";

/// The model's XML writer: compact (no indentation), the line breaks are written
/// where JMT's own files have them.
type Xml<W> = Writer<W>;

/// A name as it goes into the XML. XML 1.0 cannot carry most control characters at
/// all (not even as character references), and a line break in an attribute is
/// normalised away by the reader anyway: they become spaces. The writer escapes the
/// rest (`& < > " '`).
fn clean(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_control) {
        Cow::Owned(
            s.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(s)
    }
}

fn num(x: f64) -> String {
    format!("{x:.12e}")
}

fn newline<W: Write>(w: &mut Xml<W>) -> io::Result<()> {
    w.write_event(Event::Text(BytesText::new("\n")))
}

/// `<TAG classPath=.. name=..><value>VALUE</value></TAG>`, TAG being `parameter` or
/// `subParameter`: JMT's typed values.
fn value<W: Write>(
    w: &mut Xml<W>,
    tag: &str,
    class_path: &str,
    name: &str,
    value: &str,
) -> io::Result<()> {
    w.create_element(tag)
        .with_attribute(("classPath", class_path))
        .with_attribute(("name", name))
        .write_inner_content(|w| {
            w.create_element("value")
                .write_text_content(BytesText::new(&clean(value)))?;
            Ok(())
        })?;
    Ok(())
}

fn double<W: Write>(w: &mut Xml<W>, name: &str, v: f64) -> io::Result<()> {
    value(w, "subParameter", "java.lang.Double", name, &num(v))
}

/// `<TAG classPath=.. name=../>`: a strategy without parameters.
fn empty<W: Write>(w: &mut Xml<W>, tag: &str, class_path: &str, name: &str) -> io::Result<()> {
    w.create_element(tag)
        .with_attribute(("classPath", class_path))
        .with_attribute(("name", name))
        .write_empty()?;
    Ok(())
}

/// `<parameter array="true" classPath=.. name=..>`, its content written by `inner`.
fn array<W: Write>(
    w: &mut Xml<W>,
    class_path: &str,
    name: &str,
    inner: impl FnOnce(&mut Xml<W>) -> io::Result<()>,
) -> io::Result<()> {
    w.create_element("parameter")
        .with_attribute(("array", "true"))
        .with_attribute(("classPath", class_path))
        .with_attribute(("name", name))
        .write_inner_content(inner)?;
    Ok(())
}

/// `<section className=..>`, its content written by `inner`.
fn section<W: Write>(
    w: &mut Xml<W>,
    class_name: &str,
    inner: impl FnOnce(&mut Xml<W>) -> io::Result<()>,
) -> io::Result<()> {
    w.create_element("section")
        .with_attribute(("className", class_name))
        .write_inner_content(inner)?;
    Ok(())
}

/// `<node name=..>`, its content written by `inner`, then a line break.
fn node<W: Write>(
    w: &mut Xml<W>,
    name: &str,
    inner: impl FnOnce(&mut Xml<W>) -> io::Result<()>,
) -> io::Result<()> {
    w.create_element("node")
        .with_attribute(("name", name))
        .write_inner_content(inner)?;
    newline(w)
}

fn ref_class<W: Write>(w: &mut Xml<W>, class: &str) -> io::Result<()> {
    w.create_element("refClass")
        .write_text_content(BytesText::new(&clean(class)))?;
    Ok(())
}

/// A `ServiceTimeStrategy` sub-parameter for `s`.
fn strategy<W: Write>(w: &mut Xml<W>, s: &Service) -> io::Result<()> {
    let (class, name) = match s {
        Service::Fitted(Params::Exponential { .. }) => ("Exponential", "Exponential"),
        Service::Fitted(Params::Erlang { .. }) => ("Erlang", "Erlang"),
        Service::Fitted(Params::Gamma { .. }) => ("GammaDistr", "Gamma"),
        Service::Fitted(Params::Lognormal { .. }) => ("Lognormal", "Lognormal"),
        Service::Deterministic(_) => ("DeterministicDistr", "Deterministic"),
        Service::Replayer(_) => ("Replayer", "Replayer"),
    };
    w.create_element("subParameter")
        .with_attribute((
            "classPath",
            "jmt.engine.NetStrategies.ServiceStrategies.ServiceTimeStrategy",
        ))
        .with_attribute(("name", "ServiceTimeStrategy"))
        .write_inner_content(|w| {
            empty(
                w,
                "subParameter",
                &format!("jmt.engine.random.{class}"),
                name,
            )?;
            w.create_element("subParameter")
                .with_attribute(("classPath", &*format!("jmt.engine.random.{class}Par")))
                .with_attribute(("name", "distrPar"))
                .write_inner_content(|w| match s {
                    Service::Fitted(Params::Exponential { rate }) => double(w, "lambda", *rate),
                    Service::Fitted(Params::Erlang { phases, rate }) => {
                        double(w, "alpha", *rate)?;
                        value(
                            w,
                            "subParameter",
                            "java.lang.Long",
                            "r",
                            &phases.to_string(),
                        )
                    }
                    Service::Fitted(Params::Gamma { shape, scale }) => {
                        double(w, "alpha", *shape)?;
                        double(w, "beta", *scale)
                    }
                    Service::Fitted(Params::Lognormal { mu, sigma }) => {
                        double(w, "mu", *mu)?;
                        double(w, "sigma", *sigma)
                    }
                    Service::Deterministic(t) => double(w, "t", *t),
                    Service::Replayer(path) => value(
                        w,
                        "subParameter",
                        "java.lang.String",
                        "fileName",
                        &path.display().to_string(),
                    ),
                })?;
            Ok(())
        })?;
    Ok(())
}

/// Where a class goes from a node.
enum Route {
    /// To these stations with these probabilities.
    To(Vec<(String, f64)>),
    /// To the station (of those connected) with the fewest jobs.
    ShortestQueue,
}

/// To `station` always.
fn to(station: &str) -> Route {
    Route::To(vec![(station.to_string(), 1.0)])
}

/// A `Router` section: each class's route.
fn router<W: Write>(
    w: &mut Xml<W>,
    classes: &[ModelClass],
    dests: impl Fn(&ModelClass) -> Route,
) -> io::Result<()> {
    section(w, "Router", |w| {
        array(
            w,
            "jmt.engine.NetStrategies.RoutingStrategy",
            "RoutingStrategy",
            |w| {
                for c in classes {
                    ref_class(w, &c.name)?;
                    match dests(c) {
                        Route::To(d) => {
                            let d: Vec<(&str, f64)> =
                                d.iter().map(|(s, p)| (s.as_str(), *p)).collect();
                            routing(w, &d)?
                        }
                        Route::ShortestQueue => empty(
                            w,
                            "subParameter",
                            "jmt.engine.NetStrategies.RoutingStrategies.ShortestQueueLengthRoutingStrategy",
                            "Join the Shortest Queue (JSQ)",
                        )?,
                    }
                }
                Ok(())
            },
        )
    })
}

/// One class's routing probabilities.
fn routing<W: Write>(w: &mut Xml<W>, dests: &[(&str, f64)]) -> io::Result<()> {
    w.create_element("subParameter")
        .with_attribute((
            "classPath",
            "jmt.engine.NetStrategies.RoutingStrategies.EmpiricalStrategy",
        ))
        .with_attribute(("name", "Probabilities"))
        .write_inner_content(|w| {
            w.create_element("subParameter")
                .with_attribute(("array", "true"))
                .with_attribute(("classPath", "jmt.engine.random.EmpiricalEntry"))
                .with_attribute(("name", "EmpiricalEntryArray"))
                .write_inner_content(|w| {
                    for (station, p) in dests {
                        w.create_element("subParameter")
                            .with_attribute(("classPath", "jmt.engine.random.EmpiricalEntry"))
                            .with_attribute(("name", "EmpiricalEntry"))
                            .write_inner_content(|w| {
                                value(
                                    w,
                                    "subParameter",
                                    "java.lang.String",
                                    "stationName",
                                    station,
                                )?;
                                value(
                                    w,
                                    "subParameter",
                                    "java.lang.Double",
                                    "probability",
                                    &num(*p),
                                )
                            })?;
                    }
                    Ok(())
                })?;
            Ok(())
        })?;
    Ok(())
}

/// The `Queue` section of a station: infinite, FCFS, every class at the tail.
fn queue_section<W: Write>(w: &mut Xml<W>, classes: &[ModelClass]) -> io::Result<()> {
    section(w, "Queue", |w| {
        value(w, "parameter", "java.lang.Integer", "size", "-1")?;
        let names = ("dropStrategies", "dropStrategy");
        same_for_each_class(w, classes, "java.lang.String", names, "drop")?;
        empty(
            w,
            "parameter",
            "jmt.engine.NetStrategies.QueueGetStrategies.FCFSstrategy",
            "FCFSstrategy",
        )?;
        array(
            w,
            "jmt.engine.NetStrategies.QueuePutStrategy",
            "QueuePutStrategy",
            |w| {
                for c in classes {
                    ref_class(w, &c.name)?;
                    empty(
                        w,
                        "subParameter",
                        "jmt.engine.NetStrategies.QueuePutStrategies.TailStrategy",
                        "TailStrategy",
                    )?;
                }
                Ok(())
            },
        )
    })
}

/// An array parameter giving every class the same value: `numberOfVisits` (one visit
/// per job), `dropStrategies` (drop), ...
fn same_for_each_class<W: Write>(
    w: &mut Xml<W>,
    classes: &[ModelClass],
    java_type: &str,
    (array_name, sub_name): (&str, &str),
    v: &str,
) -> io::Result<()> {
    array(w, java_type, array_name, |w| {
        for c in classes {
            ref_class(w, &c.name)?;
            value(w, "subParameter", java_type, sub_name, v)?;
        }
        Ok(())
    })
}

/// A server's `numberOfVisits`: one per job of every class (a visit is one service).
fn one_visit_each<W: Write>(w: &mut Xml<W>, classes: &[ModelClass]) -> io::Result<()> {
    let names = ("numberOfVisits", "numberOfVisits");
    same_for_each_class(w, classes, "java.lang.Integer", names, "1")
}

/// The `ServiceStrategy` parameter: each class's service time.
fn service_strategies<W: Write>(
    w: &mut Xml<W>,
    classes: &[ModelClass],
    service: impl Fn(&ModelClass) -> Service,
) -> io::Result<()> {
    array(
        w,
        "jmt.engine.NetStrategies.ServiceStrategy",
        "ServiceStrategy",
        |w| {
            for c in classes {
                ref_class(w, &c.name)?;
                strategy(w, &service(c))?;
            }
            Ok(())
        },
    )
}

/// The model as JSIMgraph XML (see [`write_xml`]).
pub fn to_xml(m: &Model) -> String {
    let mut out = Vec::new();
    // Writing into a Vec does not fail.
    write_xml(m, &mut out).expect("writing XML into memory");
    // Everything written came from `&str`s.
    String::from_utf8(out).expect("the XML writer writes UTF-8")
}

/// Writes the model as JSIMgraph XML (UTF-8) to `out`.
pub fn write_xml<W: Write>(m: &Model, out: W) -> io::Result<()> {
    let mut w = Writer::new(out);
    let rq = m.run_queues;
    // A CPU-bound class with no time away loops on its CPU in the run-queue model.
    let loops = |c: &ModelClass| {
        rq.is_some()
            && matches!(c.population, Population::Closed { .. })
            && c.blocked_mean <= ZERO_DELAY_S
    };
    let blocked_used = m.classes.iter().any(|c| c.to_blocked() > 0.0 && !loops(c));
    let cpu_names: Vec<String> = match rq {
        Some(_) => (0..m.cpus.max(1)).map(|i| format!("{CPU}{i}")).collect(),
        None => vec![CPU.to_string()],
    };
    // CPU-bound jobs that loop stay on the first CPU, where every closed class
    // starts. The kernel puts a woken thread on an idle CPU, else near its waker or
    // on its last CPU, rarely on the one a CPU-bound task holds: the traced classes
    // go there with the measured share of wakeups and to the others evenly, instead
    // of to the shortest queue, which sent half of them there (placement as measured;
    // without it the model predicted ServiceDemo 16-33% fast beside a CPU-bound
    // process at 30-50% load).
    let placed = rq
        .and_then(|r| r.cpu_bound_wakeup_share)
        .filter(|_| m.classes.iter().any(&loops) && cpu_names.len() > 1);
    let to_cpus = |c: &ModelClass| match (rq, placed) {
        (Some(_), Some(share)) if c.traced => {
            let share = share.clamp(0.0, 1.0);
            let rest = (1.0 - share) / (cpu_names.len() - 1) as f64;
            Route::To(
                cpu_names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.clone(), if i == 0 { share } else { rest }))
                    .collect(),
            )
        }
        (Some(_), _) => Route::ShortestQueue,
        (None, _) => to(CPU),
    };
    let name = clean(&m.name);
    w.write_event(Event::Decl(BytesDecl::new(
        "1.0",
        Some("UTF-8"),
        Some("no"),
    )))?;
    newline(&mut w)?;
    w.write_event(Event::Start(BytesStart::new("archive").with_attributes([
        ("xmlns:xsi", "http://www.w3.org/2001/XMLSchema-instance"),
        ("name", &*name),
        ("xsi:noNamespaceSchemaLocation", "Archive.xsd"),
    ])))?;
    newline(&mut w)?;
    w.write_event(Event::Start(BytesStart::new("sim").with_attributes([
        ("disableStatisticStop", "false"),
        ("logDecimalSeparator", "."),
        ("logDelimiter", ";"),
        ("logPath", ""),
        ("logReplaceMode", "0"),
        ("maxEvents", "-1"),
        ("maxSamples", "1000000"),
        ("name", &*name),
        ("polling", "1.0"),
        ("xsi:noNamespaceSchemaLocation", "SIMmodeldefinition.xsd"),
    ])))?;
    newline(&mut w)?;
    for c in &m.classes {
        let name = clean(&c.name);
        let mut uc = w.create_element("userClass");
        if let Population::Closed { jobs } = c.population {
            uc = uc.with_attribute(("customers", &*jobs.to_string()));
        }
        uc.with_attributes([("name", &*name), ("priority", "0")])
            .with_attributes(match c.population {
                Population::Open { .. } => [("referenceSource", SOURCE), ("type", "open")],
                Population::Closed { .. } => {
                    [("referenceSource", &*cpu_names[0]), ("type", "closed")]
                }
            })
            .write_empty()?;
        newline(&mut w)?;
    }
    // Source: Poisson arrivals per open class, all to the CPU (closed classes start
    // there).
    node(&mut w, SOURCE, |w| {
        section(w, "RandomSource", |w| {
            array(
                w,
                "jmt.engine.NetStrategies.ServiceStrategy",
                "ServiceStrategy",
                |w| {
                    for c in &m.classes {
                        ref_class(w, &c.name)?;
                        match c.population {
                            Population::Open { rate } => {
                                strategy(w, &Service::Fitted(Params::Exponential { rate }))?
                            }
                            Population::Closed { .. } => {
                                value(
                                    w,
                                    "subParameter",
                                    "jmt.engine.NetStrategies.ServiceStrategies.ServiceTimeStrategy",
                                    "ServiceTimeStrategy",
                                    "null",
                                )?;
                            }
                        }
                    }
                    Ok(())
                },
            )
        })?;
        w.create_element("section")
            .with_attribute(("className", "ServiceTunnel"))
            .write_empty()?;
        router(w, &m.classes, to_cpus)
    })?;
    if let Some(rq) = rq {
        for cpu in &cpu_names {
            run_queue(&mut w, m, rq, cpu, blocked_used, &loops)?;
        }
    }
    // CPU: processor sharing, one server per CPU.
    if rq.is_none() {
        node(&mut w, CPU, |w| {
            queue_section(w, &m.classes)?;
            section(w, "PSServer", |w| {
                value(
                    w,
                    "parameter",
                    "java.lang.Integer",
                    "maxJobs",
                    &m.cpus.to_string(),
                )?;
                one_visit_each(w, &m.classes)?;
                service_strategies(w, &m.classes, |c| c.cpu.clone())?;
                array(
                    w,
                    "jmt.engine.NetStrategies.PSStrategy",
                    "PSStrategy",
                    |w| {
                        for c in &m.classes {
                            ref_class(w, &c.name)?;
                            empty(
                                w,
                                "subParameter",
                                "jmt.engine.NetStrategies.PSStrategies.EPSStrategy",
                                "EPSStrategy",
                            )?;
                        }
                        Ok(())
                    },
                )?;
                array(w, "java.lang.Double", "serviceWeights", |w| {
                    for c in &m.classes {
                        ref_class(w, &c.name)?;
                        value(w, "subParameter", "java.lang.Double", "serviceWeight", "1")?;
                    }
                    Ok(())
                })
            })?;
            router(w, &m.classes, |c| {
                let p = c.to_blocked();
                Route::To(if p >= 1.0 {
                    vec![(BLOCKED.to_string(), 1.0)]
                } else if p > 0.0 {
                    vec![(BLOCKED.to_string(), p), (SINK.to_string(), 1.0 - p)]
                } else {
                    vec![(SINK.to_string(), 1.0)]
                })
            })
        })?;
    }
    // Blocked: a delay with each class's blocked time per phase, back to the CPU.
    if blocked_used {
        node(&mut w, BLOCKED, |w| {
            queue_section(w, &m.classes)?;
            section(w, "Delay", |w| {
                // Classes that never block never come here; JMT still wants a strategy, and
                // a simulator a positive one.
                service_strategies(w, &m.classes, |c| {
                    c.blocked
                        .clone()
                        .unwrap_or(Service::Deterministic(ZERO_DELAY_S))
                })
            })?;
            router(w, &m.classes, to_cpus)
        })?;
    }
    node(&mut w, SINK, |w| {
        w.create_element("section")
            .with_attribute(("className", "JobSink"))
            .write_empty()?;
        Ok(())
    })?;
    // Measures: what a modeller compares with the recording.
    let mut stations: Vec<&str> = cpu_names.iter().map(String::as_str).collect();
    if blocked_used {
        stations.push(BLOCKED);
    }
    for c in &m.classes {
        let class = clean(&c.name);
        for st in &stations {
            for ty in [
                "Utilization",
                "Response Time",
                "Throughput",
                "Number of Customers",
            ] {
                measure(
                    &mut w,
                    &format!("{st}_{class}_{ty}"),
                    "station",
                    st,
                    &class,
                    ty,
                )?;
            }
        }
        for ty in ["System Response Time", "System Throughput"] {
            measure(&mut w, &format!("{class}_{ty}"), "", "", &class, ty)?;
        }
    }
    let mut connections = Vec::new();
    for cpu in &cpu_names {
        let cpu = cpu.as_str();
        connections.extend([(SOURCE, cpu), (cpu, SINK)]);
        if rq.is_some() {
            connections.push((cpu, cpu));
        }
        if blocked_used {
            connections.extend([(cpu, BLOCKED), (BLOCKED, cpu)]);
        }
    }
    for (source, target) in connections {
        w.create_element("connection")
            .with_attributes([("source", source), ("target", target)])
            .write_empty()?;
        newline(&mut w)?;
    }
    if let Some(workers) = rq.and_then(|r| r.workers) {
        let mut nodes = cpu_names.clone();
        if blocked_used {
            nodes.push(BLOCKED.to_string());
        }
        blocking_region(&mut w, m, &nodes, workers)?;
    }
    w.write_event(Event::End(BytesEnd::new("sim")))?;
    newline(&mut w)?;
    // The GUI's part: class colours and station positions.
    w.create_element("jmodel")
        .with_attribute(("xsi:noNamespaceSchemaLocation", "JModelGUI.xsd"))
        .write_inner_content(|w| {
            const COLOURS: [&str; 6] = [
                "#FF0000FF",
                "#FFFF0000",
                "#FF00A000",
                "#FFFF8000",
                "#FF8000FF",
                "#FF008080",
            ];
            for (i, c) in m.classes.iter().enumerate() {
                w.create_element("userClass")
                    .with_attributes([
                        ("color", COLOURS[i % COLOURS.len()]),
                        ("name", &*clean(&c.name)),
                    ])
                    .write_empty()?;
            }
            let mut positions = vec![(SOURCE, 40.0, 120.0)];
            for (i, cpu) in cpu_names.iter().enumerate() {
                positions.push((cpu.as_str(), 200.0, 120.0 + 80.0 * i as f64));
            }
            if blocked_used {
                positions.push((BLOCKED, 360.0, 60.0));
            }
            positions.push((SINK, 520.0, 120.0));
            for (st, x, y) in positions {
                w.create_element("station")
                    .with_attribute(("name", st))
                    .write_inner_content(|w| {
                        w.create_element("position")
                            .with_attributes([
                                ("angle", "0.0"),
                                ("rotate", "false"),
                                ("x", &*format!("{x:.1}")),
                                ("y", &*format!("{y:.1}")),
                            ])
                            .write_empty()?;
                        Ok(())
                    })?;
            }
            Ok(())
        })?;
    newline(&mut w)?;
    w.write_event(Event::End(BytesEnd::new("archive")))?;
    newline(&mut w)?;
    w.into_inner().flush()
}

/// One CPU's run queue ([`RunQueues`]): FCFS, one server, each class served a
/// slice at a time (exponential, the quantum or the visit's demand if smaller) and
/// put back at the tail until its visit is done; then blocked, or done.
fn run_queue<W: Write>(
    w: &mut Xml<W>,
    m: &Model,
    rq: RunQueues,
    cpu: &str,
    blocked_used: bool,
    loops: &dyn Fn(&ModelClass) -> bool,
) -> io::Result<()> {
    // (slice mean, probability of another slice) of a class's visit.
    let slice = |c: &ModelClass| {
        // A CPU-bound task is always preempted: its measured stretches are its
        // slices.
        if matches!(c.population, Population::Closed { .. }) {
            let s = if rq.cpu_bound_slice_s > 0.0 {
                rq.cpu_bound_slice_s
            } else {
                rq.quantum_s
            };
            return (s, 0.0);
        }
        let visit = c.cpu.mean().unwrap_or(c.cpu_mean / c.visits.max(1.0));
        if visit <= 0.0 || visit <= rq.quantum_s {
            (visit.max(f64::MIN_POSITIVE), 0.0)
        } else {
            (rq.quantum_s, 1.0 - rq.quantum_s / visit)
        }
    };
    node(w, cpu, |w| {
        queue_section(w, &m.classes)?;
        section(w, "Server", |w| {
            value(w, "parameter", "java.lang.Integer", "maxJobs", "1")?;
            one_visit_each(w, &m.classes)?;
            service_strategies(w, &m.classes, |c| match c.population {
                // The scheduler's slice of a task that never blocks: its mean length
                // every time (what ends it early, a wakeup, is the other jobs').
                Population::Closed { .. } => Service::Deterministic(slice(c).0),
                Population::Open { .. } => Service::Fitted(Params::Exponential {
                    rate: 1.0 / slice(c).0,
                }),
            })
        })?;
        router(w, &m.classes, |c| {
            if loops(c) {
                return to(cpu);
            }
            let (_, again) = slice(c);
            let p = if blocked_used { c.to_blocked() } else { 0.0 };
            let done = 1.0 - again;
            let mut d = Vec::new();
            if again > 0.0 {
                d.push((cpu.to_string(), again));
            }
            if p > 0.0 {
                d.push((BLOCKED.to_string(), done * p));
            }
            if p < 1.0 {
                d.push((SINK.to_string(), done * (1.0 - p)));
            }
            Route::To(d)
        })
    })
}

/// The worker pool as a JMT finite capacity region over `nodes`: at most `workers`
/// traced calls inside, the others waiting at its entrance (never dropped);
/// background classes weigh nothing.
fn blocking_region<W: Write>(
    w: &mut Xml<W>,
    m: &Model,
    nodes: &[String],
    workers: u32,
) -> io::Result<()> {
    w.create_element("blockingRegion")
        .with_attributes([("name", "workers"), ("type", "default")])
        .write_inner_content(|w| {
            for n in nodes {
                w.create_element("regionNode")
                    .with_attribute(("nodeName", n.as_str()))
                    .write_empty()?;
            }
            w.create_element("globalConstraint")
                .with_attribute(("maxJobs", &*workers.to_string()))
                .write_empty()?;
            w.create_element("globalMemoryConstraint")
                .with_attribute(("maxMemory", "-1"))
                .write_empty()?;
            for c in &m.classes {
                w.create_element("dropRules")
                    .with_attributes([("dropThisClass", "false"), ("jobClass", &*clean(&c.name))])
                    .write_empty()?;
            }
            for c in &m.classes {
                w.create_element("classWeight")
                    .with_attributes([
                        ("jobClass", &*clean(&c.name)),
                        ("weight", if c.traced { "1" } else { "0" }),
                    ])
                    .write_empty()?;
            }
            Ok(())
        })?;
    newline(w)
}

/// One `<measure>` line: a figure JMT (or LINE) reports for a class.
fn measure<W: Write>(
    w: &mut Xml<W>,
    name: &str,
    node_type: &str,
    station: &str,
    class: &str,
    ty: &str,
) -> io::Result<()> {
    w.create_element("measure")
        .with_attributes([
            ("alpha", "0.01"),
            ("name", name),
            ("nodeType", node_type),
            ("precision", "0.03"),
            ("referenceNode", station),
            ("referenceUserClass", class),
            ("type", ty),
            ("verbose", "false"),
        ])
        .write_empty()?;
    newline(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `f` writes, as text.
    fn render(f: impl FnOnce(&mut Xml<Vec<u8>>) -> io::Result<()>) -> String {
        let mut w = Writer::new(Vec::new());
        f(&mut w).unwrap();
        String::from_utf8(w.into_inner()).unwrap()
    }

    #[test]
    fn xml_escapes_and_strategies() {
        assert_eq!(
            render(|w| ref_class(w, "a<b>&\"c'")),
            "<refClass>a&lt;b&gt;&amp;&quot;c&apos;</refClass>"
        );
        let s = render(|w| {
            strategy(
                w,
                &Service::Fitted(Params::Erlang {
                    phases: 3,
                    rate: 1500.0,
                }),
            )
        });
        assert!(s.contains(r#"classPath="jmt.engine.random.Erlang" name="Erlang""#));
        assert!(s.contains(r#"classPath="jmt.engine.random.ErlangPar" name="distrPar""#));
        assert!(s.contains(r#"name="r"><value>3</value>"#));
        let s = render(|w| strategy(w, &Service::Replayer(PathBuf::from("/x/a&b.txt"))));
        assert!(s.contains(r#"name="fileName"><value>/x/a&amp;b.txt</value>"#));
    }

    #[test]
    fn names_are_escaped_in_attributes_and_control_characters_become_spaces() {
        let m = Model {
            name: "a\"b&<c>.jsimg".into(),
            cpus: 1,
            run_queues: None,
            classes: vec![ModelClass {
                name: "x.Y::m'\n\u{1}".into(),
                population: Population::Open { rate: 1.0 },
                traced: true,
                visits: 1.0,
                cpu_mean: 0.001,
                first_visit_mean: 0.001,
                cpu: Service::Deterministic(0.001),
                blocked_phases: 0.0,
                blocked_mean: 0.0,
                blocked: None,
                wall_mean: 0.001,
                calls: 1,
                cpu_samples: PathBuf::new(),
                blocked_samples: PathBuf::new(),
            }],
            samples: Vec::new(),
        };
        let xml = to_xml(&m);
        assert!(xml.starts_with(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<archive "
        ));
        assert!(
            xml.contains(r#" name="a&quot;b&amp;&lt;c&gt;.jsimg" "#),
            "{xml}"
        );
        assert!(xml.contains(r#"<userClass name="x.Y::m&apos;  " priority="0""#));
        assert!(xml.contains("<refClass>x.Y::m&apos;  </refClass>"));
        assert!(xml.contains(r#" name="CPU_x.Y::m&apos;  _Utilization" "#));
        assert!(xml.ends_with("</jmodel>\n</archive>\n"));
        assert!(!xml.chars().any(|c| c.is_control() && c != '\n'));
    }

    #[test]
    fn a_write_error_is_returned() {
        /// Accepts `room` bytes, then fails.
        struct Full {
            room: usize,
        }
        impl Write for Full {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if self.room == 0 {
                    return Err(io::Error::new(io::ErrorKind::StorageFull, "full"));
                }
                let n = buf.len().min(self.room);
                self.room -= n;
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let m = Model {
            name: "m.jsimg".into(),
            cpus: 1,
            run_queues: None,
            classes: vec![],
            samples: Vec::new(),
        };
        let whole = to_xml(&m).len();
        assert!(write_xml(&m, Full { room: whole }).is_ok());
        let err = write_xml(&m, Full { room: whole - 1 }).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    }

    #[test]
    fn a_fitted_service_keeps_the_measured_mean() {
        use statrs::distribution::{ContinuousCDF, Normal};
        // A lognormal sample (sigma 1.5: heavy tail), its quantiles: the family that fits
        // best, and one whose maximum-likelihood mean is not the sample's.
        let n = 200;
        let z = Normal::new(0.0, 1.0).unwrap();
        let s: Vec<f64> = (0..n)
            .map(|i| (-6.0 + 1.5 * z.inverse_cdf((i as f64 + 0.5) / n as f64)).exp())
            .collect();
        let mean = s.iter().sum::<f64>() / n as f64;
        let best = fit(&s).best_of(&MODEL_FAMILIES).unwrap().params;
        let Params::Lognormal { sigma, .. } = best else {
            panic!("expected a lognormal fit, got {best:?}");
        };
        assert!(
            (best.mean() - mean).abs() > 0.01 * mean,
            "{best:?} vs {mean}"
        );
        let service = Service::from_samples(&s);
        let Service::Fitted(Params::Lognormal { sigma: kept, .. }) = service else {
            panic!("{service:?}");
        };
        assert_eq!(kept, sigma);
        assert!((service.mean().unwrap() - mean).abs() < 1e-12 * mean);
    }

    /// A CPU-bound task there throughout thinks for no time; one there half the
    /// period, at its measured stretch and share, is away as long as it is there.
    #[test]
    fn a_cpu_bound_task_thinks_for_the_part_of_the_period_it_was_away() {
        let think = |present: f64, cpus: f64| {
            let b = BackgroundLoad {
                open_cpus: 0.2,
                open_stretch_s: 0.002,
                cpu_bound: 1,
                cpu_bound_cpus: cpus,
                cpu_bound_present: present,
                preempted_stretch_s: 0.0,
                cpu_bound_stretch_s: 0.0,
                cpu_bound_held_wait_s: 0.0,
                cpu_bound_wakeup_share: 0.0,
            };
            let classes = background_classes(&b);
            assert_eq!(classes.len(), 2);
            let c = &classes[1];
            assert_eq!(c.population, Population::Closed { jobs: 1 });
            assert_eq!(c.blocked, Some(Service::Deterministic(c.blocked_mean)));
            c.blocked_mean
        };
        assert_eq!(think(1.0, 0.6), ZERO_DELAY_S);
        assert_eq!(think(0.99, 0.6), ZERO_DELAY_S);
        // There half the time at 0.25 CPUs: a 2 ms stretch held it 4 ms, away 4 ms.
        assert!((think(0.5, 0.25) - 0.004).abs() < 1e-12);
        // No CPU time measured: nothing to scale by, there throughout.
        assert_eq!(think(0.5, 0.0), ZERO_DELAY_S);
    }

    /// The run-queue model: a station per CPU, JSQ placement from the source and the
    /// delay, another slice with the probability that keeps the visit's mean, the
    /// CPU-bound task looping on its CPU, the worker region without background weight.
    #[test]
    fn run_queues_have_a_station_per_cpu_jsq_slices_and_the_worker_region() {
        let mut m = Model {
            name: "rq.jsimg".into(),
            cpus: 2,
            run_queues: Some(RunQueues {
                quantum_s: 0.001,
                workers: Some(6),
                cpu_bound_slice_s: 0.004,
                cpu_bound_wakeup_share: None,
            }),
            classes: vec![ModelClass {
                name: "a.B::x".into(),
                population: Population::Open { rate: 100.0 },
                traced: true,
                visits: 2.0,
                cpu_mean: 0.008,
                first_visit_mean: 0.008,
                cpu: Service::Fitted(Params::Exponential { rate: 250.0 }),
                blocked_phases: 1.0,
                blocked_mean: 0.003,
                blocked: Some(Service::Deterministic(0.003)),
                wall_mean: 0.012,
                calls: 10,
                cpu_samples: PathBuf::new(),
                blocked_samples: PathBuf::new(),
            }],
            samples: Vec::new(),
        };
        m.classes.extend(background_classes(&BackgroundLoad {
            open_cpus: 0.2,
            open_stretch_s: 0.0005,
            cpu_bound: 1,
            cpu_bound_cpus: 0.5,
            cpu_bound_present: 1.0,
            preempted_stretch_s: 0.001,
            cpu_bound_stretch_s: 0.004,
            cpu_bound_held_wait_s: 0.0,
            cpu_bound_wakeup_share: 0.0,
        }));
        let xml = to_xml(&m);
        assert!(xml.contains(r#"<node name="CPU0">"#) && xml.contains(r#"<node name="CPU1">"#));
        assert!(!xml.contains(r#"<node name="CPU">"#));
        assert!(!xml.contains("PSServer"));
        // Source and Blocked place every class on the shortest queue.
        assert_eq!(
            xml.matches(r#"name="Join the Shortest Queue (JSQ)""#)
                .count(),
            2 * m.classes.len()
        );
        // A 4 ms visit in 1 ms slices: another slice with probability 3/4, then
        // blocked or done half and half.
        assert!(xml.contains(&num(0.75)), "{xml}");
        assert!(xml.contains(&num(0.125)));
        assert!(xml.contains(r#"<connection source="CPU1" target="CPU1"/>"#));
        // The CPU-bound task: deterministic 4 ms slices on its CPU.
        assert!(xml.contains(&num(0.004)));
        assert!(xml.contains(r#"<blockingRegion name="workers" type="default">"#));
        assert!(xml.contains(r#"<regionNode nodeName="Blocked"/>"#));
        assert!(xml.contains(r#"<globalConstraint maxJobs="6"/>"#));
        assert!(xml.contains(r#"<classWeight jobClass="a.B::x" weight="1"/>"#));
        assert!(xml.contains(r#"<classWeight jobClass="background (untraced)" weight="0"/>"#));
        assert!(xml.contains(r#"referenceSource="CPU0" type="closed""#));

        // With the measured placement beside a CPU-bound task: the traced class goes
        // to the task's CPU (CPU0, where it loops) with the share of wakeups the
        // kernel put there, to the other with the rest, from the source and from the
        // delay; the background classes still join the shortest queue.
        m.run_queues = m.run_queues.map(|r| RunQueues {
            cpu_bound_wakeup_share: Some(0.1),
            ..r
        });
        let xml = to_xml(&m);
        assert_eq!(
            xml.matches(r#"name="Join the Shortest Queue (JSQ)""#)
                .count(),
            2 * (m.classes.len() - 1)
        );
        let placed = format!(
            "<value>CPU0</value></subParameter><subParameter classPath=\"java.lang.Double\" name=\"probability\"><value>{}</value></subParameter></subParameter><subParameter classPath=\"jmt.engine.random.EmpiricalEntry\" name=\"EmpiricalEntry\"><subParameter classPath=\"java.lang.String\" name=\"stationName\"><value>CPU1</value></subParameter><subParameter classPath=\"java.lang.Double\" name=\"probability\"><value>{}</value>",
            num(0.1),
            num(0.9)
        );
        assert_eq!(xml.matches(&placed).count(), 2, "{xml}");
    }

    /// A CPU-bound task's slice is twice the measured wait behind it (a job that
    /// finds it on the CPU waits half a deterministic slice), its stretch when no
    /// traced thread waited behind it; the wakeup share is kept only beside one.
    #[test]
    fn a_cpu_bound_slice_follows_the_wait_behind_it() {
        let bg = |held: f64, bound: u32| BackgroundLoad {
            cpu_bound: bound,
            cpu_bound_cpus: 0.5,
            cpu_bound_present: f64::from(bound),
            cpu_bound_stretch_s: 0.007,
            cpu_bound_held_wait_s: held,
            cpu_bound_wakeup_share: 0.13,
            ..BackgroundLoad::default()
        };
        let opts = ModelOptions::default().with_run_queues(true);
        let rq = |b: &BackgroundLoad| {
            build(
                Path::new("m.jsimg"),
                Path::new("/s"),
                &[],
                &[],
                1.0,
                2,
                b,
                &opts,
            )
            .run_queues
            .unwrap()
        };
        let r = rq(&bg(0.0004, 1));
        assert!((r.cpu_bound_slice_s - 0.0008).abs() < 1e-15);
        assert_eq!(r.cpu_bound_wakeup_share, Some(0.13));
        assert_eq!(rq(&bg(0.0, 1)).cpu_bound_slice_s, 0.007);
        assert_eq!(rq(&bg(0.0004, 0)).cpu_bound_wakeup_share, None);
    }

    /// A call's service is the CPU time charged to it; what the hypervisor stole while
    /// it held a CPU goes to the background (in CPUs over the period), nested calls'
    /// not counted twice.
    #[test]
    fn stolen_time_is_background_load_not_a_calls_service() {
        use crate::parts::Parts;
        use sonda_timeline::{ExitKind, Frame, ThreadIx};
        use sonda_trace::{Pid, Tid, Time};
        let call = |depth: usize, cpu: u64, stolen: u64| {
            let parts = Parts {
                wall: 4_000_000,
                cpu,
                stolen,
                sleeping: 4_000_000 - cpu - stolen,
                ..Parts::default()
            };
            CallRecord {
                frame: Frame::Method(0),
                thread: ThreadIx(0),
                tid: Tid(7),
                pid: Pid(1),
                begin: Time(0),
                end: Time(4_000_000),
                depth,
                kind: ExitKind::Normal,
                inclusive: parts,
                exclusive: parts,
                blocked_phases: 0,
                first_visit_ns: cpu + stolen,
            }
        };
        let calls = [
            call(1, 1_000_000, 500_000),
            call(1, 3_000_000, 0),
            call(2, 100_000, 50_000),
        ];
        let all: [(&str, &[CallRecord]); 1] = [("a.B::c", &calls)];
        let m = build(
            Path::new("m.jsimg"),
            Path::new("/s"),
            &all,
            &[("a.B::c".to_string(), 2.0)],
            1.0,
            2,
            &BackgroundLoad::default(),
            &ModelOptions::default(),
        );
        assert!(
            (m.classes[0].cpu_mean - 0.002).abs() < 1e-12,
            "{}",
            m.classes[0].cpu_mean
        );
        assert!((stolen_cpus(&all, 0.5) - 0.001).abs() < 1e-12);
        assert_eq!(stolen_cpus(&all, 0.0), 0.0);
    }

    #[test]
    fn a_class_that_never_blocks_skips_the_delay() {
        let class = |name: &str, blocked: Option<Service>, p: f64| ModelClass {
            name: name.into(),
            population: Population::Open { rate: 100.0 },
            traced: true,
            visits: 1.0 + p,
            cpu_mean: 0.002,
            first_visit_mean: 0.002,
            cpu: Service::Fitted(Params::Exponential { rate: 500.0 }),
            blocked_phases: p,
            blocked_mean: 0.003,
            blocked,
            wall_mean: 0.004,
            calls: 10,
            cpu_samples: PathBuf::new(),
            blocked_samples: PathBuf::new(),
        };
        let m = Model {
            name: "t.jsimg".into(),
            cpus: 2,
            run_queues: None,
            classes: vec![
                class("a.B::x", None, 0.0),
                class("a.B::y", Some(Service::Deterministic(0.003)), 0.5),
            ],
            samples: Vec::new(),
        };
        let xml = to_xml(&m);
        assert!(xml.contains(
            r#"<parameter classPath="java.lang.Integer" name="maxJobs"><value>2</value>"#
        ));
        assert!(xml.contains(r#"<connection source="CPU" target="Blocked"/>"#));
        let y = xml.split("<refClass>a.B::y</refClass>").count();
        assert!(y > 3);
        assert_eq!(xml.matches("<userClass name=").count(), 2);
    }
}
