//! Checkpoint interval selection: the models (Young, Daly, the multi-level
//! model of Moody et al. SC10) and the estimators of their inputs from SCR
//! logs. Used by `scr interval` and by the adaptive `Need_checkpoint` policy.

pub mod estimate;
pub mod model;
