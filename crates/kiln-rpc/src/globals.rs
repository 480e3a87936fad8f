//! Global functions that expose the client, server and tracker through the FFI (what the
//! Python package `kiln.rpc` calls). Names follow TVM's where TVM has one (`rpc.Connect`,
//! `rpc.LoadRemoteModule`, `rpc.SessTableIndex`).

use crate::client::module::connection_of;
use crate::{connect, Server, ServerConfig, Session, Tracker};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{
    register_global, register_global_packed, Any, AnyView, Device, Error, Function, Result,
};
use kiln_runtime::module::{Module, ModuleNode};
use kiln_runtime::time_evaluator::TimeEvaluatorOptions;
use std::sync::{Arc, Mutex};

fn session(m: &Module) -> Result<Session> {
    Session::from_module(m).ok_or_else(|| Error::type_error("expected an RPC session module"))
}

register_global_packed!("rpc.Connect", |args: &[AnyView<'_>]| -> Result<Any> {
    let host: String = args
        .first()
        .ok_or_else(|| Error::type_error("rpc.Connect(host, port, key)"))?
        .try_as()?;
    let port: i64 = args
        .get(1)
        .ok_or_else(|| Error::type_error("rpc.Connect needs a port"))?
        .try_as()?;
    let key: String = match args.get(2) {
        Some(k) if !k.is_none() => k.try_as()?,
        _ => String::new(),
    };
    if args.len() > 4 {
        return Err(Error::value_error(
            "rpc.Connect: session constructors are not supported",
        ));
    }
    let port = u16::try_from(port).map_err(|_| Error::value_error(format!("bad port {port}")))?;
    Ok(connect(&host, port, &key)?.module().clone().into())
});

register_global!("rpc.ConnectTracker", |addr: String,
                                        key: String|
 -> Result<Module> {
    Ok(crate::tracker::connect_via_tracker(&addr, &key)?
        .module()
        .clone())
});

register_global!("rpc.LoadRemoteModule", |sess: Module,
                                          name: String|
 -> Result<Module> {
    session(&sess)?.load_module(&name)
});

register_global!("rpc.SessTableIndex", |sess: Module| -> Result<i64> {
    Ok(session(&sess)?.index() as i64)
});

register_global!("rpc.RemoteDevice", |sess: Module,
                                      device_type: i32,
                                      device_id: i32|
 -> Result<Device> {
    session(&sess)?.device(device_type, device_id)
});

register_global!("rpc.SessionClose", |sess: Module| -> Result<()> {
    session(&sess)?.close();
    Ok(())
});

// (module, name, dev_type, dev_id, number, repeat, min_repeat_ms, limit_zero_time_iterations,
// cooldown_interval_ms, repeats_to_cooldown, cache_flush_bytes, f_preproc): the evaluator runs
// on the server; the module is a remote module or the session (then `name` is a remote global).
register_global_packed!(
    "rpc.ModuleTimeEvaluator",
    |args: &[AnyView<'_>]| -> Result<Any> {
        if args.len() < 7 {
            return Err(Error::type_error(
                "rpc.ModuleTimeEvaluator takes at least 7 arguments",
            ));
        }
        let m: Module = args[0].try_as()?;
        let conn = connection_of(&m).ok_or_else(|| Error::type_error("expected an RPC module"))?;
        let sess = Session::from_connection(conn);
        let name: String = args[1].try_as()?;
        let dev = Device::new(args[2].try_as()?, args[3].try_as()?);
        let u = |i: usize, d: u32| -> Result<u32> { args.get(i).map_or(Ok(d), |a| a.try_as()) };
        let options = TimeEvaluatorOptions {
            number: u(4, 10)?,
            repeat: u(5, 1)?,
            min_repeat_ms: u(6, 0)?,
            limit_zero_time_iterations: u(7, 100)?,
            cooldown_interval_ms: u(8, 0)?,
            repeats_to_cooldown: u(9, 1)?,
            cache_flush_bytes: u(10, 0)? as usize,
        };
        let module = Session::from_module(&m).is_none().then_some(&m);
        let f: Function = sess.time_evaluator(module, &name, dev, &options)?;
        Ok(f.into())
    }
);

/// A running server or tracker, stopped by `stop()` or when the last reference goes.
#[derive(Default)]
struct Service {
    server: Mutex<Option<Server>>,
    tracker: Mutex<Option<Tracker>>,
}

/// A module holding a running service (`port()`, `stop()`, `active_sessions()`).
struct Holder {
    service: Arc<Service>,
    port: u16,
}

impl ModuleNode for Holder {
    fn kind(&self) -> &str {
        "rpc_service"
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let port = self.port as i64;
        let svc = self.service.clone();
        Ok(match name {
            "port" => Some(Function::from_typed(move || port)),
            "stop" => Some(Function::from_typed(move || {
                if let Some(mut s) = svc.server.lock().recover().take() {
                    s.stop();
                }
                if let Some(mut t) = svc.tracker.lock().recover().take() {
                    t.stop();
                }
            })),
            "active_sessions" => Some(Function::from_typed(move || {
                svc.server
                    .lock()
                    .recover()
                    .as_ref()
                    .map_or(0, |s| s.active_sessions() as i64)
            })),
            _ => None,
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

register_global_packed!("rpc.ServerStart", |args: &[AnyView<'_>]| -> Result<Any> {
    let s = |i: usize| -> Result<Option<String>> {
        match args.get(i) {
            Some(a) if !a.is_none() => a
                .try_as::<String>()
                .map(|v| Some(v).filter(|v| !v.is_empty())),
            _ => Ok(None),
        }
    };
    let n = |i: usize, d: i64| -> Result<i64> { args.get(i).map_or(Ok(d), |a| a.try_as()) };
    let config = ServerConfig {
        host: s(0)?.unwrap_or_else(|| "127.0.0.1".into()),
        port: n(1, 9090)? as u16,
        port_end: n(2, 9199)? as u16,
        key: s(3)?.unwrap_or_default(),
        workdir: s(4)?.map(Into::into),
        tracker: s(5)?,
        ..Default::default()
    };
    let server = Server::start(config)?;
    let port = server.port();
    let service = Arc::new(Service {
        server: Mutex::new(Some(server)),
        ..Default::default()
    });
    Ok(Module::new(Holder { service, port }).into())
});

register_global!("rpc.TrackerStart", |host: String,
                                      port: i64,
                                      port_end: i64|
 -> Result<Module> {
    let t = Tracker::start(&host, port as u16, port_end as u16)?;
    let port = t.port();
    let service = Arc::new(Service {
        tracker: Mutex::new(Some(t)),
        ..Default::default()
    });
    Ok(Module::new(Holder { service, port }))
});

register_global!("rpc.TrackerSummary", |addr: String| -> Result<String> {
    Ok(crate::tracker::summary(&addr)?.to_string())
});
