//! Node health checks: the library's own ([`scr::runloop::health`]), which
//! the product's run loop (`scr run`) and this testbed share.

pub use scr::runloop::health::*;
