use super::standby_next;

#[test]
fn standbys_step_only_while_no_task_restores() {
    assert!(!standby_next(true, true), "a restoring task goes first");
    assert!(standby_next(false, true), "standbys step when nothing restores");
    assert!(!standby_next(true, false) && !standby_next(false, false));
}
