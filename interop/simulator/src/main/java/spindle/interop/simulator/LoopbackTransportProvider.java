package spindle.interop.simulator;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.logging.Logger;

import com.seagate.kinetic.simulator.io.provider.nio.ssl.SslChannelInitializer;
import com.seagate.kinetic.simulator.io.provider.nio.tcp.NioChannelInitializer;
import com.seagate.kinetic.simulator.io.provider.spi.MessageService;
import com.seagate.kinetic.simulator.io.provider.spi.TransportProvider;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import kinetic.simulator.SimulatorConfiguration;

/**
 * Transport plug-in for the reference simulator that serves the plain Kinetic port and the
 * TLS port on the loopback address only.
 *
 * <p>The stock providers ({@code TcpNioTransportProvider}, {@code SslNioTransportProvider})
 * call {@code ServerBootstrap.bind(port)}, i.e. they listen on every address. The simulator
 * engine loads a single class named by the system property {@code kinetic.io.plugin.class}
 * instead of its stock plain transport when {@code kinetic.io.plugin=true}; with
 * {@code SimulatorConfiguration.setStartSsl(false)} it does not start its stock TLS transport
 * either, so this class is then the only thing that listens. It reuses the simulator's own
 * channel initializers, so framing, TLS (the simulator's built-in self-signed key store) and
 * request processing are exactly the stock ones.
 *
 * <p>A configured port of 0 binds an ephemeral port; the actual port is written back into the
 * simulator configuration (so GETLOG reports it) and exposed through {@link #boundPort()} and
 * {@link #boundTlsPort()}.
 */
public class LoopbackTransportProvider implements TransportProvider {

    private static final Logger LOG = Logger.getLogger(LoopbackTransportProvider.class.getName());

    /** The instance the engine created (the engine instantiates by reflection). */
    private static volatile LoopbackTransportProvider current;

    private MessageService service;
    private EventLoopGroup bossGroup;
    private EventLoopGroup workerGroup;
    private Channel plainChannel;
    private Channel tlsChannel;
    private volatile int boundPort = -1;
    private volatile int boundTlsPort = -1;

    /** Public no-arg constructor: the simulator engine loads plug-ins with Class.newInstance(). */
    public LoopbackTransportProvider() {
        current = this;
    }

    static LoopbackTransportProvider current() {
        return current;
    }

    int boundPort() {
        return boundPort;
    }

    int boundTlsPort() {
        return boundTlsPort;
    }

    @Override
    public void init(MessageService service) {
        this.service = service;
    }

    @Override
    public void start() throws IOException {
        SimulatorConfiguration config = service.getServiceConfiguration();
        InetAddress loopback = InetAddress.getByName("127.0.0.1");
        bossGroup = new NioEventLoopGroup(1);
        workerGroup = new NioEventLoopGroup(2);
        try {
            plainChannel = new ServerBootstrap()
                    .group(bossGroup, workerGroup)
                    .channel(NioServerSocketChannel.class)
                    .childHandler(new NioChannelInitializer(service))
                    .bind(new InetSocketAddress(loopback, config.getPort()))
                    .sync()
                    .channel();
            boundPort = ((InetSocketAddress) plainChannel.localAddress()).getPort();
            config.setPort(boundPort);

            tlsChannel = new ServerBootstrap()
                    .group(bossGroup, workerGroup)
                    .channel(NioServerSocketChannel.class)
                    .childHandler(new SslChannelInitializer(service))
                    .bind(new InetSocketAddress(loopback, config.getSslPort()))
                    .sync()
                    .channel();
            boundTlsPort = ((InetSocketAddress) tlsChannel.localAddress()).getPort();
            config.setSslPort(boundTlsPort);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stop();
            throw new IOException("interrupted while binding", e);
        } catch (RuntimeException e) {
            stop();
            throw new IOException("cannot bind loopback transport: " + e, e);
        }
        LOG.info("loopback transport bound: plain 127.0.0.1:" + boundPort + ", tls 127.0.0.1:"
                + boundTlsPort);
    }

    @Override
    public synchronized void stop() {
        if (plainChannel != null) {
            plainChannel.close().awaitUninterruptibly();
            plainChannel = null;
        }
        if (tlsChannel != null) {
            tlsChannel.close().awaitUninterruptibly();
            tlsChannel = null;
        }
        if (bossGroup != null) {
            bossGroup.shutdownGracefully();
            bossGroup = null;
        }
        if (workerGroup != null) {
            workerGroup.shutdownGracefully();
            workerGroup = null;
        }
    }

    @Override
    public void close() {
        stop();
    }
}
