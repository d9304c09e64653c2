package spindle.interop.simulator;

import java.io.File;
import java.util.concurrent.CountDownLatch;
import java.util.logging.Level;
import java.util.logging.Logger;

import kinetic.simulator.KineticSimulator;
import kinetic.simulator.SimulatorConfiguration;

/**
 * Starts the reference Kinetic simulator (0.8.0.4) safely for local interoperability tests:
 * bound to 127.0.0.1 only (plain and TLS ports) and with the multicast heartbeat off.
 *
 * <pre>
 * LoopbackSimulator --port N --tls-port N --home DIR [--verbose]
 * </pre>
 *
 * Port 0 picks a free port. When both listeners are up it prints exactly one line to stdout:
 *
 * <pre>
 * kinetic simulator listening on 127.0.0.1:PORT tls 127.0.0.1:TLSPORT home DIR
 * </pre>
 *
 * and then runs until the process is killed. Exit status 1 (with a message on stderr) if the
 * simulator could not start. Never use the stock {@code SimulatorRunner}: it binds every
 * address and multicasts a heartbeat every few seconds.
 */
public final class LoopbackSimulator {

    private LoopbackSimulator() {
    }

    public static void main(String[] args) throws Exception {
        Integer port = null;
        Integer tlsPort = null;
        String home = null;
        boolean verbose = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--port":
                    port = Integer.parseInt(need(args, ++i, a));
                    break;
                case "--tls-port":
                    tlsPort = Integer.parseInt(need(args, ++i, a));
                    break;
                case "--home":
                    home = need(args, ++i, a);
                    break;
                case "--verbose":
                    verbose = true;
                    break;
                default:
                    usage("unknown argument: " + a);
            }
        }
        if (port == null || tlsPort == null || home == null) {
            usage("--port, --tls-port and --home are required");
        }

        if (!verbose) {
            // The simulator logs at INFO for every connection; keep the output moderate.
            Logger.getLogger("").setLevel(Level.WARNING);
        }

        File homeDir = new File(home).getAbsoluteFile();
        if (!homeDir.isDirectory() && !homeDir.mkdirs()) {
            die("cannot create home directory " + homeDir);
        }

        // Replace the stock plain transport (binds all addresses) by the loopback plug-in.
        // The engine reads these as system properties when it is constructed.
        System.setProperty("kinetic.io.plugin", "true");
        System.setProperty("kinetic.io.plugin.class", LoopbackTransportProvider.class.getName());
        System.clearProperty("kinetic.io.ssl");
        System.clearProperty("kinetic.io.http");
        System.clearProperty("kinetic.io.https");
        System.clearProperty("kinetic.io.udt");

        SimulatorConfiguration config = new SimulatorConfiguration();
        config.setPort(port);
        config.setSslPort(tlsPort);
        // The stock TLS transport binds all addresses too: the plug-in serves TLS instead.
        config.setStartSsl(false);
        // No heartbeat: tick time 0 means the engine creates no heartbeat task, and the
        // provider is a silent one in case anything asks for it anyway.
        config.setTickTime(0);
        config.setHeartbeatProvider(new NoHeartbeatProvider());
        config.setProperty(SimulatorConfiguration.KINETIC_HOME, homeDir.getPath());

        // KineticSimulator swallows start-up exceptions (it logs and closes), so check the
        // transport ourselves.
        KineticSimulator simulator = new KineticSimulator(config);
        LoopbackTransportProvider transport = LoopbackTransportProvider.current();
        if (transport == null || transport.boundPort() <= 0 || transport.boundTlsPort() <= 0) {
            simulator.close();
            die("simulator failed to start (transport plug-in not bound); rerun with --verbose");
        }

        Runtime.getRuntime().addShutdownHook(new Thread(simulator::close, "simulator-shutdown"));

        System.out.println("kinetic simulator listening on 127.0.0.1:" + transport.boundPort()
                + " tls 127.0.0.1:" + transport.boundTlsPort() + " home " + homeDir.getPath());
        System.out.flush();

        new CountDownLatch(1).await();
    }

    private static String need(String[] args, int i, String flag) {
        if (i >= args.length) {
            usage(flag + " needs a value");
        }
        return args[i];
    }

    private static void usage(String message) {
        die(message + "\nusage: LoopbackSimulator --port N --tls-port N --home DIR [--verbose]");
    }

    private static void die(String message) {
        System.err.println("LoopbackSimulator: " + message);
        System.exit(1);
    }
}
