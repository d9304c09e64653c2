//! The scripted cases (`spindle_sim::cases`), each a state a seed found.

#[test]
fn a_completion_that_failed_after_its_swap_keeps_its_parts_data_until_the_upload_ends() {
    spindle_sim::a_completion_failed_after_its_swap(1).unwrap();
}

#[test]
fn an_orphaned_chunk_is_found_and_collected_and_nothing_else_is() {
    spindle_sim::an_orphaned_chunk(2).unwrap();
}

#[test]
fn a_completion_refuses_part_data_it_cannot_claim() {
    spindle_sim::a_completion_meets_its_parts_data_taken(3).unwrap();
}

#[test]
fn a_connection_that_lost_a_message_is_given_up_and_connected_again() {
    spindle_sim::a_connection_that_lost_a_message(4).unwrap();
}

#[test]
fn racing_writers_of_one_object_all_succeed_and_leave_one_whole_object() {
    // Seeds 6 and 11: a completion whose raced swap another writer chose, and which then
    // found its parts' intents changed by that writer's release.
    for seed in [6, 11] {
        spindle_sim::racing_writers_of_one_object(seed).unwrap();
    }
}

#[test]
fn racing_writers_of_one_versioned_object_each_leave_exactly_one_version() {
    // Seed 2: three PUTs whose swaps raced and never took effect were answered as done, and
    // their versions were nowhere.
    spindle_sim::racing_writers_of_one_versioned_object(2).unwrap();
}
