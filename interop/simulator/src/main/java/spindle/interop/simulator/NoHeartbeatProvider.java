package spindle.interop.simulator;

import com.seagate.kinetic.simulator.heartbeat.HeartbeatProvider;

import kinetic.simulator.SimulatorConfiguration;

/**
 * Heartbeat provider that sends nothing. The launcher also sets the heartbeat tick time to 0,
 * which keeps the engine from creating a heartbeat task at all; this provider is a second
 * guard so that the stock {@code MulticastHeartbeatProvider} (UDP multicast to 239.1.2.3) is
 * never instantiated, not even lazily.
 */
public class NoHeartbeatProvider implements HeartbeatProvider {

    @Override
    public void init(SimulatorConfiguration config) {
        // nothing to open
    }

    @Override
    public void sendHeartbeat() {
        // deliberately silent: no multicast, no network traffic
    }

    @Override
    public void close() {
        // nothing to close
    }
}
