//! The drive-wide back-off after wrong PINs: guessing a PIN over the network is slow however
//! many connections guess at once.

use std::time::{Duration, Instant};

use bytes::Bytes;

/// Longest pause in PIN checks after wrong PINs; the pause doubles with every wrong PIN in a
/// row from 100 ms, so guessing a PIN over the network is slow. The count and the pause are
/// drive-wide (`DriveState::pin_attempts`): a PIN that arrives while checks are paused is
/// answered NOT_AUTHORIZED at once, unchecked, so parallel connections guess no faster than one
/// and nobody waits in a queue behind queued guesses. The wrong PIN's own answer is sent when
/// its pause ends (only its own connection waits, holding no lock), so a client that retries
/// after its answer, as a person or the reference client does, finds checks open again.
pub const MAX_PIN_BACKOFF: Duration = Duration::from_secs(10);
/// The pause after the first wrong PIN.
const FIRST_PIN_BACKOFF: Duration = Duration::from_millis(100);

/// Wrong PINs in a row, drive-wide, and until when no PIN is checked.
#[derive(Debug, Default)]
pub struct PinBackoff {
    failures: u32,
    paused_until: Option<Instant>,
}

/// What a PIN check found.
pub enum PinCheck {
    Right,
    /// Not compared: checks are paused for `left` more.
    Paused { left: Duration },
    /// Wrong: checks are now paused for `pause`; `failures` wrong PINs in a row.
    Wrong { pause: Duration, failures: u32 },
}

impl PinBackoff {
    /// Checks `given` against `stored` at `now`: refused unchecked while paused; a wrong PIN
    /// opens a longer pause, a right one resets the count.
    pub fn check(&mut self, stored: &Bytes, given: &Bytes, now: Instant) -> PinCheck {
        if let Some(until) = self.paused_until.filter(|u| *u > now) {
            return PinCheck::Paused { left: until.duration_since(now) };
        }
        if pins_match(stored, given) {
            *self = PinBackoff::default();
            return PinCheck::Right;
        }
        let shift = self.failures.min(16);
        self.failures = self.failures.saturating_add(1);
        let pause = (FIRST_PIN_BACKOFF * (1u32 << shift)).min(MAX_PIN_BACKOFF);
        self.paused_until = Some(now + pause);
        PinCheck::Wrong { pause, failures: self.failures }
    }
}

/// Whether two PINs are equal, compared in constant time: a PIN must not leak through timing.
/// Both are hashed the same way (proto's HMAC under an empty key) and the tags compared by
/// its constant-time `verify`.
fn pins_match(stored: &Bytes, given: &Bytes) -> bool {
    spindle_proto::hmac::verify(&[], stored, &spindle_proto::hmac::sign(&[], given))
}
