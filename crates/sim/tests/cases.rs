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
fn concurrent_overwrites_of_one_object_all_succeed_and_leave_one_whole_object() {
    // Seed 17: a raced swap chosen by another writer, which released its data; seed 0: two
    // writers releasing the same replaced data at once.
    for seed in [17, 0] {
        spindle_sim::concurrent_overwrites_of_one_object(seed).unwrap();
    }
}
