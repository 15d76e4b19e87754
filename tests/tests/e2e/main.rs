//! The end-to-end tests, one test binary (one link step, one start) for all: each
//! module was a test file of its own. Tests of one binary run on parallel threads, so
//! each takes the machine: [`sonda_tests::exclusive`] when its figures need the
//! machine to itself (timing against the kernel or the JVM), else
//! [`sonda_tests::shared`].

mod architecture;
mod attach;
mod bad_input;
mod budget;
mod buffer;
mod methods;
mod metrics;
mod model_accuracy;
mod native;
mod paraver_scale;
mod parquet;
mod plots;
mod record;
mod services;
mod tls;
mod tomcat;
